package main

import "testing"

// TestParseBenchTokens: T and P+T entries, and entries refused before any benchmark runs
// (malformed, not positive, or beyond a session's largest context).
func TestParseBenchTokens(t *testing.T) {
	runs, err := parseBenchTokens("512, 2048,30000+2048")
	if err != nil {
		t.Fatal(err)
	}
	want := []benchRun{{T: 512}, {T: 2048}, {pos0: 30000, T: 2048}}
	if len(runs) != len(want) {
		t.Fatalf("got %v, want %v", runs, want)
	}
	for i := range want {
		if runs[i] != want[i] {
			t.Errorf("entry %d: got %+v, want %+v", i, runs[i], want[i])
		}
	}
	for _, bad := range []string{"", "abc", "5+", "+5", "0", "-3", "-1+5", "99999999999", "16777216+1", "1+16777216"} {
		if _, err := parseBenchTokens(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	if _, err := parseBenchTokens("16777215+1"); err != nil {
		t.Errorf("a whole largest context: %v", err)
	}
}
