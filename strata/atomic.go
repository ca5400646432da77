package strata

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// writeFileAtomic writes a file through write so that path holds either what it held before or
// the whole new content: the bytes go to a temporary file in path's directory (named
// .BASE.tmp-*, mode 0644), which is flushed to disk (fsync) and renamed over path, and the
// directory is synced so that the rename survives a crash. On error the temporary file is
// removed and path is untouched. Errors wrap ErrInvalidArgument and name the file.
func writeFileAtomic(path string, write func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	if err := bw.Flush(); err != nil {
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	if err := f.Chmod(0o644); err != nil {
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	if err := f.Sync(); err != nil {
		return wrapf(ErrInvalidArgument, err, "writing %s: fsync", path)
	}
	if err := f.Close(); err != nil {
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	if err := os.Rename(tmp, path); err != nil {
		return wrapf(ErrInvalidArgument, err, "writing %s: rename", path)
	}
	syncDir(dir)
	return nil
}

// syncDir flushes a directory's entries to disk (best effort: not every system can open a
// directory for it, and the file itself is already on disk).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
