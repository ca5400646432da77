// Package memtest reads what tests of memory residency check: the fields of the mapping that
// holds an address, from Linux's /proc/self/smaps.
package memtest

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// SmapsKiB is the value in KiB of a field ("Rss:") of the mapping of /proc/self/smaps that
// holds address a. The test is skipped where there is no /proc/self/smaps, and fails where no
// mapping holds a or the field is not a number of kB.
func SmapsKiB(t testing.TB, a uintptr, field string) int {
	t.Helper()
	v, err := strconv.Atoi(strings.TrimSuffix(SmapsLine(t, a, field), " kB"))
	if err != nil {
		t.Fatalf("smaps %s: %v", field, err)
	}
	return v
}

// SmapsLine is the rest of the line of a field ("VmFlags:"), trimmed, of the mapping of
// /proc/self/smaps that holds address a (skips and failures as SmapsKiB's).
func SmapsLine(t testing.TB, a uintptr, field string) string {
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
		if rest, ok := strings.CutPrefix(line, field); ok && in {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no mapping of /proc/self/smaps holds %#x", a)
	return ""
}
