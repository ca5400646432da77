package kernels

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestAdviseHuge: the 2 MiB pages inside a buffer of hugeF32 are advised (VmFlags "hg" on the
// mapping that holds them, /proc/self/smaps).
func TestAdviseHuge(t *testing.T) {
	b := hugeF32(3 * hugePage / 4) // 6 MiB: at least two whole huge pages inside
	p := uintptr(unsafe.Pointer(&b[0]))
	mid := (p + hugePage - 1) &^ (hugePage - 1)
	if flags := vmFlags(t, mid); !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the mapping of a 6 MiB hugeF32 buffer has VmFlags %q, want hg", flags)
	}
	b[len(b)-1] = 1 // keeps b alive past the check
}

// vmFlags is the VmFlags line of the mapping of /proc/self/smaps that holds address a.
func vmFlags(t *testing.T, a uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if rng, _, ok := strings.Cut(line, " "); ok && strings.Contains(rng, "-") && !strings.HasSuffix(rng, ":") {
			lo, hi, _ := strings.Cut(rng, "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(a) >= l && uint64(a) < h
			continue
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no mapping of /proc/self/smaps holds %#x", a)
	return ""
}
