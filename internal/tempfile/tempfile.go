// Package tempfile names and creates the temporary files through which strata writes a file
// whole (strata.WriteFile, gguf.Write): .BASE.tmp-PID-RANDOM in the file's directory, PID being
// the writing process's id, so that a later write of the same path can tell a temporary that a
// killed process left behind (its PID no live process of this host) from one being written, and
// remove it, and a process can remove its own when a signal ends it.
package tempfile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Prefix is the name every temporary of a file named base starts with: ".BASE.tmp-".
func Prefix(base string) string { return "." + base + ".tmp-" }

// Create removes the temporaries of dir/base that no live process owns (RemoveStale) and creates
// a new one for this process, .BASE.tmp-PID-RANDOM, mode 0600 until the writer sets another.
func Create(dir, base string) (*os.File, error) {
	RemoveStale(dir, base)
	return os.CreateTemp(dir, Prefix(base)+strconv.Itoa(os.Getpid())+"-*")
}

// RemoveStale removes the regular files of dir named Prefix(base)+PID-* whose PID is no live
// process of this host. A temporary of a process still running is left alone; where liveness
// cannot be told (not a unix system) none is removed.
func RemoveStale(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := Prefix(base)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		os.Remove(filepath.Join(dir, e.Name()))
	}
}

// RemoveOwn removes the temporaries this process has open in dir (every file named
// .*.tmp-PID-*, PID this process's id): for a host ending on a signal in the middle of a write.
func RemoveOwn(dir string) {
	own, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-"+strconv.Itoa(os.Getpid())+"-*"))
	for _, p := range own {
		os.Remove(p)
	}
}

// SyncDir flushes a directory's entries to disk (best effort: not every system can open a
// directory for it, and the file itself is already on disk).
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
