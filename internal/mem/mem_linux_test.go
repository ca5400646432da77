package mem

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratakernels/strata/internal/mem/memtest"
)

// TestAdviseHuge: the 2 MiB pages inside a buffer of F32 are advised (VmFlags "hg" on the
// mapping that holds them, /proc/self/smaps).
func TestAdviseHuge(t *testing.T) {
	b := F32(3 * HugePage / 4) // 6 MiB: at least two whole huge pages inside
	p := uintptr(unsafe.Pointer(&b[0]))
	mid := (p + HugePage - 1) &^ (HugePage - 1)
	if flags := vmFlags(t, mid); !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the mapping of a 6 MiB F32 buffer has VmFlags %q, want hg", flags)
	}
	b[len(b)-1] = 1 // keeps b alive past the check
}

// TestPopulateRead: the pages of a mapped file are in the process's page tables after
// PopulateRead (the mapping's Rss in /proc/self/smaps), before any read; a file mapping not
// populated has none.
func TestPopulateRead(t *testing.T) {
	needPopulate(t)
	const size = 1 << 20
	path := t.TempDir() + "/f"
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapped := func() []byte {
		b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(b) })
		return b
	}
	cold, warm := mapped(), mapped()
	PopulateRead(warm)
	if rss := memtest.SmapsKiB(t, uintptr(unsafe.Pointer(&warm[0])), "Rss:"); rss != size>>10 {
		t.Fatalf("Rss of a populated 1 MiB file mapping: %d KiB, want %d", rss, size>>10)
	}
	if rss := memtest.SmapsKiB(t, uintptr(unsafe.Pointer(&cold[0])), "Rss:"); rss != 0 {
		t.Fatalf("Rss of a file mapping never read: %d KiB, want 0", rss)
	}
}

// needPopulate skips a test on kernels before 5.14, which have no MADV_POPULATE_READ.
func needPopulate(t *testing.T) {
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		var major, minor int
		fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
		if major < 5 || major == 5 && minor < 14 {
			t.Skipf("kernel %d.%d has no MADV_POPULATE_READ", major, minor)
		}
	}
}

// vmFlags is the VmFlags of the mapping of /proc/self/smaps that holds address a.
func vmFlags(t *testing.T, a uintptr) string { return memtest.SmapsLine(t, a, "VmFlags:") }
