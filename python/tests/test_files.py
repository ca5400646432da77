"""Output files written whole (strata.write_file) and the example scripts' output flags: a write
that fails, is interrupted or is killed leaves the file as it was and no temporary beside it, a
killed run's temporary is removed by the next write, and an output naming an input is refused
before anything loads."""

import os
import re
import signal
import stat
import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT, TINY_Q4

PREFILL = os.path.join(ROOT, "examples", "python", "prefill.py")


def entries(d):
    return sorted(os.listdir(d))


@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt(), SystemExit(143)],
                         ids=["error", "sigint", "sigterm"])
def test_write_file_failure_keeps_file(strata, tmp_path, exc):
    path = tmp_path / "out.npy"
    path.write_bytes(b"old")

    def write(f):
        f.write(b"partial")
        raise exc

    with pytest.raises(type(exc)):
        strata.write_file(path, write)
    assert path.read_bytes() == b"old"
    assert entries(tmp_path) == ["out.npy"]


def test_write_file_removes_a_killed_runs_temporary(strata, tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".out.npy.tmp-{dead.pid}-abc"
    live = tmp_path / f".out.npy.tmp-{os.getppid()}-def"
    for p in (stale, live):
        p.write_bytes(b"left by a run")
    strata.write_file(tmp_path / "out.npy", lambda f: f.write(b"new"))
    assert (tmp_path / "out.npy").read_bytes() == b"new"
    assert entries(tmp_path) == sorted(["out.npy", live.name])
    assert oct(os.stat(tmp_path / "out.npy").st_mode & 0o777) == "0o644"


def run_script(libpath, script, *args, driver=None):
    env = dict(os.environ, STRATA_LIBRARY=libpath, PYTHONPATH=os.path.join(ROOT, "python"))
    cmd = [sys.executable] + (["-c", driver, script] if driver else [script]) + [str(a) for a in args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


# Runs a script whose np.save writes part of the file and then sends SIGTERM to the process.
KILL_IN_SAVE = """import os, runpy, signal, sys
import numpy as np
def save(f, a):
    f.write(b"partial")
    os.kill(os.getpid(), signal.SIGTERM)
np.save = save
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_prefill_script_sigterm_while_saving(libpath, tmp_path):
    out = tmp_path / "l.npy"
    out.write_bytes(b"old")
    res = run_script(libpath, PREFILL, "--model", TINY_Q4, "--tokens", "1,2,3", "--save-logits", out,
                     driver=KILL_IN_SAVE)
    assert res.returncode == 128 + signal.SIGTERM, res.stdout + res.stderr
    assert out.read_bytes() == b"old"
    assert entries(tmp_path) == ["l.npy"]


def test_prefill_script_failure_keeps_file(libpath, tmp_path):
    out = tmp_path / "l.npy"
    out.write_bytes(b"old")
    res = run_script(libpath, PREFILL, "--model", TINY_Q4, "--tokens", "1,2,3", "--max-context", "2",
                     "--save-logits", out)
    assert res.returncode != 0 and "context" in res.stderr, res.stderr
    assert out.read_bytes() == b"old" and entries(tmp_path) == ["l.npy"]
    res = run_script(libpath, PREFILL, "--model", TINY_Q4, "--tokens", "1,2,3", "--save-logits", out)
    assert res.returncode == 0, res.stderr
    assert np.load(out).shape == (512,) and entries(tmp_path) == ["l.npy"]


def test_prefill_script_one_token_words(libpath):
    """A one-token run says "1 token", never "1 tokens" (a rate such as "89.1 tokens/s" is not a count)."""
    res = run_script(libpath, PREFILL, "--model", TINY_Q4, "--tokens", "7")
    assert res.returncode == 0, res.stderr
    assert "prompt    1 token\n" in res.stdout and "prefill   1 token in " in res.stdout, res.stdout
    assert not re.search(r"(^|[^0-9.])1 tokens", res.stdout), res.stdout


@pytest.mark.parametrize("args,message", [
    (["--tokens", "1,,2"], "--tokens: empty entry in the token list (after 1 id)"),
    (["--tokens", "1,a"], "--tokens: token 'a' (prompt index 1) is not an integer"),
    (["--tokens", "1,512"], "--tokens: token id 512 (prompt index 1) is outside the model's vocabulary [0, 512)"),
    (["--token", "1"], "unrecognized arguments: --token"),
    (["--tokens-file", "{ids}", "--save-logits", "{ids}"], "is the file --tokens-file reads"),
    (["--tokens", "1", "--save-logits", "{tmp}"], "is a directory"),
    (["--tokens", "1", "--save-logits", "{tmp}/missing/l.npy"], "its directory does not exist"),
    (["--tokens-file", "{tmp}/missing.txt"], "missing.txt: No such file or directory"),
    (["--tokens-file", "{tmp}"], "Is a directory"),
    (["--tokens-file", "{binary}"], "byte 0xff at offset 0 is not UTF-8"),
    (["--random-tokens", "99999999999"], "--random-tokens 99999999999: at most 16777216 tokens"),
])
def test_prefill_script_refusals(libpath, tmp_path, args, message):
    ids = tmp_path / "ids.txt"
    ids.write_text("1,2,3")
    binary = tmp_path / "ids.bin"
    binary.write_bytes(b"\xff\xfe1,2")
    args = [a.format(ids=ids, tmp=tmp_path, binary=binary) for a in args]
    res = run_script(libpath, PREFILL, "--model", TINY_Q4, *args)
    assert res.returncode != 0 and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert ids.read_text() == "1,2,3"


def test_write_file_fifo(strata, tmp_path):
    """An existing FIFO (a device such as /dev/null alike) is written in place, not replaced by a
    file renamed over it; one with no reader is refused at once instead of waited on."""
    fifo = tmp_path / "out.npy"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="a FIFO with no reader"):
        strata.write_file(fifo, lambda f: f.write(b"unread"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and entries(tmp_path) == ["out.npy"]
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # the reader, holding a write end so that opening does not wait
    try:
        strata.write_file(fifo, lambda f: f.write(b"the whole content"))
        assert os.read(fd, 100) == b"the whole content"
    finally:
        os.close(fd)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and entries(tmp_path) == ["out.npy"]
