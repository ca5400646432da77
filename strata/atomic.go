package strata

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/stratakernels/strata/internal/tempfile"
)

// WriteFile writes the file at path through write so that path holds either what it held
// before or the whole new content, never a part: the bytes go to a temporary file in path's
// directory, named .BASE.tmp-PID-RANDOM (PID: this process's id; mode 0644), which is flushed to
// disk (fsync) and renamed over path, and the directory is synced so that the rename survives a
// crash. When write or any step fails, the temporary file is removed and path is untouched. A
// process killed while writing (SIGKILL, or a signal its host does not catch) leaves its
// temporary file behind: each WriteFile first removes the temporary files of path whose PID is
// no live process of this host (a temporary of a process still running, one saving the same
// path at the same time, is left alone). Hosts that catch SIGINT and SIGTERM (the prefill CLI
// does) let the write finish or fail, which removes it. Every file strata writes (state files,
// prompt-cache checkpoints, mlx-lm caches, the CLI's logits) goes through it. A path that
// exists and is neither a regular file nor a directory (a device such as /dev/null, a FIFO) is
// written in place instead: renaming over it would replace the device or pipe with a file. A
// FIFO with no reader is refused rather than waited on. Errors wrap ErrInvalidArgument and name
// the file.
func WriteFile(path string, write func(w io.Writer) error) (err error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return writeInPlace(path, fi.Mode(), write)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := tempfile.Create(dir, base)
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
	tempfile.SyncDir(dir)
	return nil
}

// writeInPlace writes an existing device or FIFO through write (WriteFile's case for a path that
// is not a regular file).
func writeInPlace(path string, mode os.FileMode, write func(w io.Writer) error) error {
	f, err := openInPlace(path)
	if err != nil {
		if mode&os.ModeNamedPipe != 0 && errors.Is(err, errNoReader) {
			return wrapf(ErrInvalidArgument, err, "writing %s: a FIFO with no reader", path)
		}
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		f.Close()
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	if err := f.Close(); err != nil {
		return wrapf(ErrInvalidArgument, err, "writing %s", path)
	}
	return nil
}
