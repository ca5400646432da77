package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// plural is "1 what" or "n whats".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// joinInts is v comma-separated.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// size prints a byte count in decimal units (GB = 1e9 bytes, as checkpoint sizes are quoted).
func size(b int64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

// mibOf is b in MiB.
func mibOf(b int64) float64 { return float64(b) / (1 << 20) }

// homeRel shortens paths under the home directory to ~/... for display.
func homeRel(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	if rel, err := filepath.Rel(home, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join("~", rel)
	}
	return p
}
