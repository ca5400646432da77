package strata

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratakernels/strata/internal/safetensors"
)

// diskTier is a prompt cache's directory. Layout: ROOT/.lock (locked during evictions), and per
// model and stage a subdirectory FINGERPRINT16-Llo-hi holding one state file per checkpoint,
// named POSITION-KEY.state (the position in 9 digits, the prefix key in hex). A file is written
// to a temporary name and renamed into place (WriteFile), so a reader, in this process or
// another, sees a whole file or none; two writers of the same checkpoint write the same name,
// and either whole file serves. The least recently used files (by modification time: a hit
// renews it) are removed while the files of ROOT's subdirectories take more than bytes.
type diskTier struct {
	root, dir string
	bytes     int64
	mu        sync.Mutex // one eviction at a time in this process (the lock file orders processes)
}

// staleTemp is the age from which a temporary file in the cache directory is taken for one a
// crashed process left behind, and removed.
const staleTemp = time.Hour

// openDiskTier creates ROOT/sub if needed and checks that files can be created in it.
func openDiskTier(root, sub string, bytes int64) (*diskTier, error) {
	d := &diskTier{root: root, dir: filepath.Join(root, sub), bytes: bytes}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, wrapf(ErrInvalidArgument, err, "prompt cache directory %s cannot be created", d.dir)
	}
	probe, err := os.CreateTemp(d.dir, ".probe-*")
	if err != nil {
		return nil, wrapf(ErrInvalidArgument, err, "prompt cache directory %s is not writable", d.dir)
	}
	probe.Close()
	os.Remove(probe.Name())
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, wrapf(ErrInvalidArgument, err, "prompt cache directory %s: its lock file", root)
	}
	lock.Close()
	return d, nil
}

func checkpointName(pos int, key string) string { return fmt.Sprintf("%09d-%s.state", pos, key) }

// parseCheckpointName returns the position and key of a checkpoint file name.
func parseCheckpointName(name string) (pos int, key string, ok bool) {
	base, found := strings.CutSuffix(name, ".state")
	p, k, found2 := strings.Cut(base, "-")
	if !found || !found2 || len(p) != 9 || len(k) != 32 {
		return 0, "", false
	}
	if _, err := fmt.Sscanf(p, "%d", &pos); err != nil {
		return 0, "", false
	}
	return pos, k, true
}

// lookup loads the deepest checkpoint file of the directory deeper than best whose tokens are a
// prefix of prompt and that usable accepts (its position, whether it has logits), into a fresh
// cache of maxCtx tokens; nil when there is none. A file that fails its checks as corrupt is
// removed (a file of a newer format is left alone); a file another process removed meanwhile is
// passed over.
func (d *diskTier) lookup(m *Model, maxCtx int, prompt []int32, best int, usable func(int, bool) bool, key func([]int32) string) *loadedState {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		m.dev.logf(LogWarn, "prompt cache: reading %s: %v", d.dir, err)
		return nil
	}
	byPos := map[int]map[string]bool{}
	for _, e := range entries {
		pos, k, ok := parseCheckpointName(e.Name())
		if !ok || pos <= best || pos > len(prompt) || !e.Type().IsRegular() {
			continue
		}
		if byPos[pos] == nil {
			byPos[pos] = map[string]bool{}
		}
		byPos[pos][k] = true
	}
	positions := make([]int, 0, len(byPos))
	for p := range byPos {
		positions = append(positions, p)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(positions)))
	for _, pos := range positions {
		k := key(prompt[:pos])
		if !byPos[pos][k] {
			continue
		}
		path := filepath.Join(d.dir, checkpointName(pos, k))
		ls, err := readStateFile(m, maxCtx, path)
		if err != nil {
			if errors.Is(err, ErrCheckpoint) && !errors.Is(err, fs.ErrNotExist) {
				m.dev.logf(LogWarn, "prompt cache: removing %v", err)
				os.Remove(path)
			}
			continue
		}
		if !slices.Equal(ls.ids, prompt[:pos]) || !usable(pos, ls.logits != nil) {
			ls.st.free(m.dev.be)
			continue
		}
		now := time.Now()
		os.Chtimes(path, now, now)
		return ls
	}
	return nil
}

// write stores a checkpoint as a state file, unless a file of it is there already (written by
// another call or process), which is renewed instead; one without logits is replaced by one with
// them.
func (d *diskTier) write(m *Model, pos int, key string, ids []int32, src stateSource, logits []float32) error {
	path := filepath.Join(d.dir, checkpointName(pos, key))
	if _, err := os.Stat(path); err == nil && (logits == nil || fileHasLogits(path)) {
		now := time.Now()
		os.Chtimes(path, now, now)
		return nil
	}
	meta, err := stateMetadata(m, pos)
	if err != nil {
		return err
	}
	return WriteFile(path, func(w io.Writer) error {
		_, err := writeState(w, path, meta, stateTensors(m, pos, ids, src, logits))
		return err
	})
}

// fileHasLogits reports whether the state file at path holds logits (false when its header
// cannot be read).
func fileHasLogits(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	h, _, err := safetensors.ReadHeader(path, f)
	if err != nil {
		return false
	}
	_, err = h.Tensor(tensorLogits)
	return err == nil
}

// evict removes the least recently used state files of ROOT's subdirectories while they take
// more than the budget, and temporary files older than staleTemp, holding ROOT/.lock so that
// processes sharing the directory evict one at a time. It returns this model's files and the
// bytes of all of them after it.
func (d *diskTier) evict(dev *Device) (files int, held int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	lock, err := os.OpenFile(filepath.Join(d.root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		dev.logf(LogWarn, "prompt cache: %v", err)
		return 0, 0
	}
	defer lock.Close()
	// An advisory lock (flock) orders the evictions of processes sharing the directory; strata
	// builds for Linux and macOS, which both have it.
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		dev.logf(LogWarn, "prompt cache: locking %s: %v", lock.Name(), err)
		return 0, 0
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	type file struct {
		path  string
		size  int64
		mtime time.Time
	}
	var all []file
	subs, err := os.ReadDir(d.root)
	if err != nil {
		dev.logf(LogWarn, "prompt cache: reading %s: %v", d.root, err)
		return 0, 0
	}
	for _, sub := range subs {
		if !sub.IsDir() {
			continue
		}
		dir := filepath.Join(d.root, sub.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			path := filepath.Join(dir, e.Name())
			name := e.Name()
			if strings.HasPrefix(name, ".") && (strings.Contains(name, ".tmp-") || strings.HasPrefix(name, ".probe-")) {
				if time.Since(info.ModTime()) > staleTemp {
					os.Remove(path)
				}
				continue
			}
			if _, _, ok := parseCheckpointName(name); ok {
				all = append(all, file{path, info.Size(), info.ModTime()})
				held += info.Size()
			}
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].mtime.Equal(all[j].mtime) {
			return all[i].mtime.Before(all[j].mtime)
		}
		return all[i].path < all[j].path
	})
	for _, f := range all {
		if held <= d.bytes {
			if filepath.Dir(f.path) == d.dir {
				files++
			}
			continue
		}
		if err := os.Remove(f.path); err == nil || errors.Is(err, fs.ErrNotExist) {
			held -= f.size
		}
	}
	return files, held
}
