"""Output files written whole, as libstrata writes its own (strata.WriteFile in Go)."""

import errno
import os
import stat
import tempfile
from typing import BinaryIO, Callable, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


def _alive(pid: int) -> bool:
    """Whether a process of this id runs on this host (signal 0; EPERM: another user's, alive)."""
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno != errno.ESRCH
    return True


def _remove_stale(directory: str, base: str) -> None:
    """Removes directory's temporary files of base (.BASE.tmp-PID-*) whose PID is no live
    process: those of a run killed while it wrote (best effort)."""
    prefix = f".{base}.tmp-"
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        pid = name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) > 0 and not _alive(int(pid)):
            try:
                os.remove(os.path.join(directory, name))
            except OSError:
                pass


def check_output(path: PathLike, flag: str) -> None:
    """Raises ValueError naming flag and path when path could not be written at the end of a
    run: its directory missing or not a directory or not writable, or path a directory."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    if not os.path.exists(directory):
        raise ValueError(f"{flag} {path}: its directory does not exist")
    if not os.path.isdir(directory):
        raise ValueError(f"{flag} {path}: {directory} is not a directory")
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path}: is a directory")
    if _in_place(path) is not None:
        return  # a device or pipe, written in place (write_file): its directory need not be writable
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: its directory is not writable")


def _in_place(path: str) -> Optional[int]:
    """The mode of path when it exists and is neither a regular file nor a directory (a device
    such as /dev/null, a FIFO): write_file writes such a path in place. Else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else mode


def _write_in_place(path: str, mode: int, write: Callable[[BinaryIO], None]) -> None:
    """write_file's case for an existing device or FIFO: opened without waiting (a FIFO with no
    reader is refused, OSError ENXIO, rather than waited on), then written through write(f)."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        if e.errno == errno.ENXIO and stat.S_ISFIFO(mode):
            raise OSError(e.errno, "a FIFO with no reader", path) from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as f:
        write(f)


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether a and b name one file: the same absolute normalised path, or both existing and
    the same file (a link, another spelling)."""
    if os.path.abspath(a) == os.path.abspath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_file(path: PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Writes the file at path through write(f) so that path holds either what it held before
    or the whole new content: the bytes go to a temporary file beside it (.BASE.tmp-PID-RANDOM,
    mode 0644), flushed to disk and renamed over path. On any exception, KeyboardInterrupt and
    SystemExit included (a script that turns SIGTERM into SystemExit gets it removed on SIGTERM
    too), the temporary file is removed and path is untouched. The temporary files of path left
    by a killed process (their PID no live process) are removed first. A path that exists and is
    neither a regular file nor a directory (a device such as /dev/null, a FIFO) is written in
    place instead, never replaced; a FIFO with no reader is refused rather than waited on.
    Errors are those of write and of the file system (OSError naming the file)."""
    path = os.fspath(path)
    mode = _in_place(path)
    if mode is not None:
        _write_in_place(path, mode, write)
        return
    directory, base = os.path.split(path)
    directory = directory or "."
    _remove_stale(directory, base)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.tmp-{os.getpid()}-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fchmod(f.fileno(), 0o644)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise

