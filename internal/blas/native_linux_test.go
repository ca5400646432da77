package blas

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ebitengine/purego"
)

// A user's OPENBLAS_CORETYPE naming kernels the CPU cannot run is refused before the library
// loads (it would die of SIGILL); values the CPU can run, unknown ones and "" pass.
func TestCheckUserCoreType(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the check applies on amd64 only")
	}
	for _, tc := range []struct {
		v            string
		avx512, avx2 bool
		refused      bool
		mentions     string
	}{
		{"", false, false, false, ""},
		{"SkylakeX", true, true, false, ""},
		{"SkylakeX", false, true, true, "AVX-512"},
		{"skylakex", false, true, true, "AVX-512"},
		{"COOPERLAKE", false, true, true, "AVX-512"},
		{"SapphireRapids", false, false, true, "AVX-512"},
		{"Haswell", false, true, false, ""},
		{"Haswell", false, false, true, "AVX2 and FMA"},
		{"Zen", false, false, true, "AVX2 and FMA"},
		{"Prescott", false, false, false, ""},
		{"NoSuchCore", false, false, false, ""},
	} {
		err := checkUserCoreType(tc.v, tc.avx512, tc.avx2)
		if (err != nil) != tc.refused {
			t.Errorf("%q avx512=%t avx2=%t: err %v, want refused=%t", tc.v, tc.avx512, tc.avx2, err, tc.refused)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), tc.mentions) || !strings.Contains(err.Error(), "OPENBLAS_CORETYPE="+tc.v)) {
			t.Errorf("%q: error %q should name the value and %s", tc.v, err, tc.mentions)
		}
	}
}

// The reason a failed load gives: dlerror's text when there is one (named once), and when
// dlerror was empty, "not found on the library path" or the file found and what dlopen of its
// path says.
func TestOpenError(t *testing.T) {
	const so = "libstrata-test-none.so.0"
	empty := t.TempDir()
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, so), []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err  error
		dirs []string
		want string
	}{
		{errors.New(so + ": cannot open shared object file: No such file or directory"), nil,
			so + ": cannot open shared object file: No such file or directory"},
		{errors.New("something else"), nil, so + ": something else"},
		{errNoReason, []string{empty}, so + ": not found on the library path"},
		{errNoReason, nil, so + ": not found on the library path"},
		{errNoReason, []string{empty, bad}, filepath.Join(bad, so) + ": "},
	} {
		got := openError(so, tc.err, tc.dirs).Error()
		if !strings.HasPrefix(got, tc.want) || strings.HasSuffix(got, ": ") || strings.Count(got, so) != 1 {
			t.Errorf("openError(%q, %v): %q, want it to start with %q, name the library once and end in a reason", tc.err, tc.dirs, got, tc.want)
		}
		t.Logf("%s", got)
	}
}

// ldconf: include lines (relative and glob), comments and blank lines.
func TestLdConfDirs(t *testing.T) {
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ld.so.conf", "# top\n/opt/a/lib\ninclude conf.d/*.conf\n\n/opt/b # trailing\n")
	write("conf.d/1.conf", "/usr/lib/x86_64-linux-gnu\ninclude ../ld.so.conf\n")
	write("conf.d/2.conf", "\t/usr/local/lib  \n")
	got := ldConfDirs(filepath.Join(d, "ld.so.conf"), 0)
	// The include loop stops at the depth limit, so the first entries repeat: check the order
	// of the first four and that nothing else appears.
	want := []string{"/opt/a/lib", "/usr/lib/x86_64-linux-gnu", "/opt/a/lib", "/usr/lib/x86_64-linux-gnu"}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("ldConfDirs = %q, want it to start with %q", got, want)
	}
	for _, g := range got {
		if !slices.Contains([]string{"/opt/a/lib", "/usr/lib/x86_64-linux-gnu", "/usr/local/lib", "/opt/b"}, g) {
			t.Fatalf("ldConfDirs = %q: unexpected %q", got, g)
		}
	}
	if !slices.Contains(got, "/usr/local/lib") || got[len(got)-1] != "/opt/b" {
		t.Fatalf("ldConfDirs = %q: want /usr/local/lib and /opt/b last", got)
	}
}

// TestDlopenReasonUnderLoad: dlopen of a missing library from many goroutines while others keep
// every thread busy always comes back with dlerror's message. purego.Dlopen unlocked, run the
// same way, is logged for comparison: it can lose the message (15 of 3200 calls in one
// run), because dlerror is read on whichever thread the goroutine resumed on.
func TestDlopenReasonUnderLoad(t *testing.T) {
	const so = "libstrata-test-none.so.0"
	stop := make(chan struct{})
	var spin sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		spin.Add(1)
		go func() {
			defer spin.Done()
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				for j := range 10000 {
					x += j
				}
				runtime.Gosched()
			}
		}()
	}
	count := func(open func() error) (lost, calls int64) {
		var l, c atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					c.Add(1)
					if err := open(); err == nil || errors.Is(err, errNoReason) || err.Error() == "" ||
						!strings.Contains(err.Error(), "cannot open shared object file") {
						l.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return l.Load(), c.Load()
	}
	lost, calls := count(func() error { _, err := dlopen(so); return err })
	unlockedLost, unlockedCalls := count(func() error {
		_, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
		return err
	})
	close(stop)
	spin.Wait()
	t.Logf("message lost in %d of %d locked calls, %d of %d unlocked", lost, calls, unlockedLost, unlockedCalls)
	if lost != 0 {
		t.Fatalf("dlopen lost dlerror's message in %d of %d calls", lost, calls)
	}
}
