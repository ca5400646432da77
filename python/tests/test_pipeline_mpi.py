"""examples/python/pipeline_mpi.py under mpirun: the pipeline's logits against one process's,
bitwise, and its refusals of bad input. Each run has a timeout: a rank left waiting fails the
test instead of hanging it."""

import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from helpers import GOLDENS, ROOT, TESTDATA, TINY_Q4, read_safetensors

SCRIPT = os.path.join(ROOT, "examples", "python", "pipeline_mpi.py")
TINY_Q3 = os.path.join(TESTDATA, "qwen3next-tiny")
GOLDEN_FILES = {TINY_Q4: "q4_model_goldens.safetensors", TINY_Q3: "model_goldens.safetensors"}
TIMEOUT = 120  # seconds per mpirun; a run takes about 1 s on 2 cores
CHUNK = 37  # does not divide the 96-token prompt: the last chunk is short


@pytest.fixture(scope="module")
def mpirun():
    """mpirun (Debian openmpi-bin) and mpi4py for this interpreter (python3-mpi4py). Missing:
    a skip, or a failure under `make test`, whose deps target installs both (STRATA_REQUIRE_MPI)."""
    missing = [] if shutil.which("mpirun") else ["mpirun (Debian openmpi-bin)"]
    if subprocess.run([sys.executable, "-c", "import mpi4py"], capture_output=True).returncode != 0:
        missing.append(f"mpi4py for {sys.executable} (Debian python3-mpi4py)")
    if missing:
        msg = f"the MPI pipeline needs {' and '.join(missing)}: `make deps` installs them as root"
        if os.environ.get("STRATA_REQUIRE_MPI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return shutil.which("mpirun")


def launch(mpirun, libpath, *apps, script=SCRIPT, env=None, timeout=TIMEOUT):
    """Runs mpirun --oversubscribe with one app context per (ranks, args) in apps (joined by ':',
    so that ranks may be given different arguments), with env added to the environment, and
    returns (status, stdout, stderr). On a timeout the whole job (its process group) is killed
    and the test fails."""
    cmd = [mpirun, "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    for i, (n, args) in enumerate(apps):
        cmd += ([":"] if i else []) + ["-np", str(n), sys.executable, script] + [str(a) for a in args]
    env = dict(os.environ, STRATA_LIBRARY=libpath, PYTHONPATH=os.path.join(ROOT, "python"), **(env or {}))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not end within {timeout} s\n{out}\n{err}")
    return proc.returncode, out, err


# Open MPI's shared-memory transport with the smallest eager limit it accepts: every message but
# the smallest goes by rendezvous, so a send completes only once its receive is posted and
# progressed (no buffering hides a schedule that waits on a receive posted later). Open MPI 4
# names the transport vader (56 bytes: its fragment header), Open MPI 5 sm.
def strict_mpi_env(mpirun):
    info = subprocess.run([os.path.join(os.path.dirname(mpirun), "ompi_info"), "--param", "btl", "all", "--level", "9"],
                          capture_output=True, text=True).stdout
    for btl in ("vader", "sm"):
        m = re.search(rf'btl_{btl}_eager_limit" \(current value: "\d+"', info)
        if m:
            return {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": f"self,{btl}", f"OMPI_MCA_btl_{btl}_eager_limit": "56"}
    pytest.fail(f"ompi_info names no shared-memory transport (vader or sm) with an eager limit:\n{info[:2000]}")


# Every chunk count from 1 to 12 (chunk = ceil(96 / n)), with and without all logits, through
# one pipeline job that loads its stages once; rank 0 compares each run with one process making
# the same prefill calls, bitwise.
SCHEDULES = """import sys
import numpy as np
sys.path.insert(0, {examples!r})
import pipeline_mpi
import strata
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank, ranks = comm.Get_rank(), comm.Get_size()
ids = np.asarray([{ids}], np.int32)
T = ids.size
dev = strata.Device("cpu")
stage = pipeline_mpi.even_stages(4, ranks)[rank]
model = strata.Model(dev, {model!r}, layers=stage)
whole = strata.Model(dev, {model!r}) if rank == 0 else None
for n in range(1, 13):
    chunk = -(-T // n)
    assert -(-T // chunk) == n
    for all_logits in (False, True):
        st = pipeline_mpi.Stage(comm, model)
        got = st.run(ids, chunk, all_logits, 0)
        st.free()
        if rank == 0:
            with whole.session(4096) as s:
                rows = [s.prefill(ids[a:a + chunk], all_logits=all_logits) for a in range(0, T, chunk)]
            want = np.concatenate(rows) if all_logits else rows[-1]
            print(f"chunks {{n}} all_logits {{all_logits}}: " + ("equal" if np.array_equal(got, want) else "DIFFERENT"),
                  flush=True)
"""


@pytest.mark.parametrize("ranks", [2, 3])
def test_no_schedule_deadlocks(mpirun, libpath, prompts, tmp_path, ranks):
    ids, _ = prompts[TINY_Q4]
    driver = tmp_path / "schedules.py"
    driver.write_text(SCHEDULES.format(examples=os.path.dirname(SCRIPT), ids=",".join(map(str, ids)), model=TINY_Q4))
    rc, stdout, stderr = launch(mpirun, libpath, (ranks, []), script=str(driver), env=strict_mpi_env(mpirun),
                                timeout=90)
    assert rc == 0, stdout + stderr
    lines = [line for line in stdout.splitlines() if line.startswith("chunks ")]
    assert lines == [f"chunks {n} all_logits {a}: equal" for n in range(1, 13) for a in (False, True)], stdout + stderr


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    """{model dir: (token ids, path of a file holding them)}: prompt a of each model's goldens (96 tokens)."""
    d = tmp_path_factory.mktemp("prompts")
    out = {}
    for model_dir, name in GOLDEN_FILES.items():
        ids = read_safetensors(os.path.join(GOLDENS, name))["a.input_ids"].astype(np.int32)
        path = d / (os.path.basename(model_dir) + ".txt")
        path.write_text(",".join(map(str, ids)))
        out[model_dir] = (ids, path)
    return out


def one_process(strata, device, model_dir, ids, chunk, all_logits=True):
    """The whole model's logits in one process, in prefill calls of chunk tokens (0: one call):
    every token's, or the last token's (the head then runs on one row per call, whose bits may
    differ from that row of all_logits)."""
    with strata.Model(device, model_dir) as m, m.session(4096) as s:
        c = chunk or len(ids)
        rows = [s.prefill(ids[a:a + c], all_logits=all_logits) for a in range(0, len(ids), c)]
        return np.concatenate(rows) if all_logits else rows[-1]


@pytest.mark.parametrize("model_dir", [TINY_Q4, TINY_Q3], ids=["qwen4exp", "qwen3next"])
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("chunk", [0, CHUNK], ids=["one-shot", f"chunk{CHUNK}"])
def test_pipeline_equals_one_process(mpirun, libpath, strata, device, prompts, tmp_path, model_dir, ranks, chunk):
    ids, tokens_file = prompts[model_dir]
    out = tmp_path / "logits.npy"
    rc, stdout, stderr = launch(mpirun, libpath, (ranks, ["--model", model_dir, "--tokens-file", tokens_file,
                                                          "--chunk", chunk, "--all-logits", "--save-logits", out]))
    assert rc == 0, stdout + stderr
    got = np.load(out)
    want = one_process(strata, device, model_dir, ids, chunk)
    assert got.dtype == np.float32 and got.shape == want.shape == (len(ids), 512)
    assert np.array_equal(got, want), f"max |diff| {np.max(np.abs(got - want)):.3g}"
    if chunk:
        # Against the one-shot logits the chunked ones differ in the last bits (strata's chunked
        # prefill continues a session within 1e-4 of one shot: TestChunkedPrefill).
        assert np.max(np.abs(got - one_process(strata, device, model_dir, ids, 0))) <= 1e-4
    # The summary: one row per stage, its layers split evenly.
    rows = [line.split() for line in stdout.splitlines() if line[:5].strip().isdigit()]
    assert [r[0] for r in rows] == [str(k) for k in range(ranks)], stdout
    assert " ".join(r[1] for r in rows) == {2: "0:2 2:4", 3: "0:2 2:3 3:4"}[ranks]
    assert "tokens/s" in stdout and f"in chunks of {chunk or len(ids)}" in stdout


@pytest.mark.parametrize("n,chunk", [(100, 32), (128, 32), (40, 10), (8, 2)])
def test_readme_command_strict_transport(mpirun, libpath, strata, device, tmp_path, n, chunk):
    """The README's command with --all-logits and 4 or more chunks (which once deadlocked where MPI
    did not buffer the messages), as a user runs it, under the shared-memory transport at its
    smallest eager limit: it ends, and its logits equal one process's bitwise."""
    ids = (np.arange(n, dtype=np.int32) * 37 + 11) % 512
    tokens_file = tmp_path / "ids.txt"
    tokens_file.write_text(",".join(map(str, ids)))
    out = tmp_path / "l.npy"
    rc, stdout, stderr = launch(mpirun, libpath, (2, ["--model", TINY_Q4, "--tokens-file", tokens_file, "--chunk", chunk,
                                                      "--all-logits", "--save-logits", out]), env=strict_mpi_env(mpirun))
    assert rc == 0, stdout + stderr
    assert np.array_equal(np.load(out), one_process(strata, device, TINY_Q4, ids, chunk))


def test_last_logits_explicit_stages(mpirun, libpath, strata, device, prompts, tmp_path):
    ids, tokens_file = prompts[TINY_Q4]
    out = tmp_path / "last.npy"
    rc, stdout, stderr = launch(mpirun, libpath, (3, ["--model", TINY_Q4, "--tokens-file", tokens_file, "--chunk", 25,
                                                      "--stages", "0:1,1:2,2:4", "--save-logits", out]))
    assert rc == 0, stdout + stderr
    got = np.load(out)
    assert got.shape == (512,) and got.dtype == np.float32
    assert np.array_equal(got, one_process(strata, device, TINY_Q4, ids, 25, all_logits=False))
    assert "stage: layers 2:4 of 4" in stdout


def test_copy_in_another_folder_agrees(mpirun, libpath, strata, device, prompts, tmp_path):
    # The fingerprint is of the checkpoint, not of its path.
    ids, tokens_file = prompts[TINY_Q4]
    copy = tmp_path / "copy"
    shutil.copytree(TINY_Q4, copy)
    out = tmp_path / "logits.npy"
    common = ["--tokens-file", tokens_file, "--all-logits"]
    rc, stdout, stderr = launch(mpirun, libpath, (1, ["--model", TINY_Q4, "--save-logits", out] + common),
                                (1, ["--model", copy] + common))
    assert rc == 0, stdout + stderr
    assert np.array_equal(np.load(out), one_process(strata, device, TINY_Q4, ids, 0))


def assert_every_rank(stderr, ranks, *words):
    """Each rank's report line ("pipeline_mpi: rank R: ...") is there and holds every word."""
    lines = [line for line in stderr.splitlines() if line.startswith("pipeline_mpi: rank ")]
    for r in range(ranks):
        mine = [line for line in lines if line.startswith(f"pipeline_mpi: rank {r}: ")]
        assert len(mine) == 1, f"rank {r}:\n{stderr}"
        for w in words:
            assert w in mine[0], f"rank {r}: {w!r} not in {mine[0]!r}"


@pytest.mark.parametrize("ranks,stages,words", [
    (2, "0:1,2:4", ["leaves a gap", "layer 1 of 4 is in no stage"]),
    (2, "0:1,3:4", ["leaves a gap", "layers 1:3 of 4 are in no stage"]),
    (2, "0:3,2:4", ["overlaps", "layer 2 of 4 is in stage 0 and in stage 1"]),
    (3, "0:1,1:2,2:3", ["ends at layer 3", "layer 3 of 4 is in no stage"]),
    (2, "0:2,2:5", ["ends at layer 5", "the model has 4 layers"]),
    (3, "0:2,2:4", ["gives 2 stage(s) for 3 ranks"]),
    (2, "0:2;2:4", ["'0:2;2:4' is not lo:hi"]),
    (5, "", ["5 ranks for a model of 4 layers"]),
])
def test_bad_stage_map(mpirun, libpath, prompts, ranks, stages, words):
    rc, _, stderr = launch(mpirun, libpath, (ranks, ["--model", TINY_Q4, "--tokens-file", prompts[TINY_Q4][1],
                                                     "--stages", stages]))
    assert rc != 0
    assert_every_rank(stderr, ranks, *words)


def test_ranks_disagree_on_the_model(mpirun, libpath, prompts, tmp_path):
    tokens = ["--tokens-file", prompts[TINY_Q4][1]]
    # Another model of the same layer count, and the same checkpoint with one config value changed.
    changed = tmp_path / "changed"
    shutil.copytree(TINY_Q4, changed)
    cfg = (changed / "config.json").read_text()
    assert '"rms_norm_eps": 1e-06' in cfg
    (changed / "config.json").write_text(cfg.replace('"rms_norm_eps": 1e-06', '"rms_norm_eps": 1e-05'))
    for other in (TINY_Q3, changed):
        rc, _, stderr = launch(mpirun, libpath, (1, ["--model", TINY_Q4] + tokens), (1, ["--model", other] + tokens))
        assert rc != 0
        assert_every_rank(stderr, 2, "the ranks disagree on the model (checkpoint fingerprint)", f"rank 1: ", str(other))
    # The same model, different options.
    rc, _, stderr = launch(mpirun, libpath, (1, ["--model", TINY_Q4, "--chunk", 8] + tokens),
                           (1, ["--model", TINY_Q4, "--chunk", 9] + tokens))
    assert rc != 0
    assert_every_rank(stderr, 2, "the ranks disagree on the options", "--chunk 8", "--chunk 9")


def test_bad_model_dir_and_prompt(mpirun, libpath, prompts, tmp_path):
    tokens = ["--tokens-file", prompts[TINY_Q4][1]]
    missing = tmp_path / "missing"
    rc, _, stderr = launch(mpirun, libpath, (2, ["--model", TINY_Q4] + tokens), (1, ["--model", missing] + tokens))
    assert rc != 0
    assert_every_rank(stderr, 3, "failed on 1 of 3 ranks: rank 2:", str(missing / "config.json"))
    bad = tmp_path / "bad.txt"
    bad.write_text("1,2,512")
    rc, _, stderr = launch(mpirun, libpath, (2, ["--model", TINY_Q4, "--tokens-file", bad]))
    assert rc != 0
    assert_every_rank(stderr, 2, "rank 0:", "token 2 is 512, outside [0, 512)")


# A rank whose sends are altered (a row short or long): the next rank receives a hidden state of
# the wrong size, or rank 0 logits of the wrong size.
DRIVER = """import sys
import numpy as np
sys.path.insert(0, {examples!r})
import pipeline_mpi
from mpi4py import MPI
if MPI.COMM_WORLD.Get_rank() == {rank}:
    send = pipeline_mpi.Stage.send
    pipeline_mpi.Stage.send = lambda self, comm, buf, dest: send(self, comm, {change}, dest)
pipeline_mpi.main()
"""
HIDDEN = "the hidden state of chunk 0 (tokens 0..36) from rank 0 has {} floats, want 37888 (37 tokens x hidden_size 1024)"


@pytest.mark.parametrize("ranks,rank,change,message", [
    (3, 0, "np.ascontiguousarray(buf[:-1])", "rank 1 of 3 failed: ValueError: " + HIDDEN.format(36864)),
    (3, 0, "np.concatenate([buf, buf[:1]])", "rank 1 of 3 failed: ValueError: " + HIDDEN.format("more than 37888")),
    (2, 1, "np.ascontiguousarray(buf[:-1])",
     "rank 0 of 2 failed: ValueError: the logits of chunk 0 from rank 1 have 18432 floats, want 18944"),
], ids=["hidden-short", "hidden-long", "logits-short"])
def test_wrong_size_aborts(mpirun, libpath, prompts, tmp_path, ranks, rank, change, message):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(examples=os.path.dirname(SCRIPT), rank=rank, change=change))
    rc, _, stderr = launch(mpirun, libpath, (ranks, ["--model", TINY_Q4, "--tokens-file", prompts[TINY_Q4][1],
                                                     "--chunk", CHUNK, "--all-logits"]), script=str(driver))
    assert rc != 0
    assert "pipeline_mpi: " + message in stderr, stderr


def test_prefill_failure_aborts(mpirun, libpath, prompts, tmp_path):
    # The session of 50 tokens overflows at the second chunk, on the first rank to get there; the
    # --save-logits file is written only at the end, so it keeps what it held.
    out = tmp_path / "l.npy"
    out.write_bytes(b"old")
    rc, _, stderr = launch(mpirun, libpath, (2, ["--model", TINY_Q4, "--tokens-file", prompts[TINY_Q4][1],
                                                 "--chunk", CHUNK, "--max-context", 50, "--save-logits", out]))
    assert rc != 0
    assert "failed: STRATA_ERR_CAPACITY" in stderr and "exceeds the session's 50-token context" in stderr, stderr
    assert out.read_bytes() == b"old" and os.listdir(tmp_path) == ["l.npy"]


def test_output_flags_refused(mpirun, libpath, prompts, tmp_path):
    # --save-logits naming the prompt file, and --tokens (no abbreviation of --tokens-file).
    ids = tmp_path / "ids.txt"
    ids.write_text("1,2,3")
    rc, _, stderr = launch(mpirun, libpath, (2, ["--model", TINY_Q4, "--tokens-file", ids, "--save-logits", ids]))
    assert rc != 0 and ids.read_text() == "1,2,3"
    assert_every_rank(stderr, 2, f"rank 0: --save-logits {ids} is the file --tokens-file reads")
    rc, _, stderr = launch(mpirun, libpath, (1, ["--model", TINY_Q4, "--tokens", ids]))
    assert rc != 0 and "the following arguments are required: --tokens-file" in stderr, stderr


def test_rank_that_dies_ends_the_job(mpirun, libpath, prompts, tmp_path):
    # Rank 1 of 3 exits at its first send without a word: mpirun ends the job (ranks 0 and 2 are
    # waiting on it) with that rank's status.
    driver = tmp_path / "die.py"
    driver.write_text(DRIVER.format(examples=os.path.dirname(SCRIPT), rank=1, change="os._exit(3)")
                      .replace("import sys", "import os, sys"))
    rc, _, stderr = launch(mpirun, libpath, (3, ["--model", TINY_Q4, "--tokens-file", prompts[TINY_Q4][1],
                                                 "--chunk", CHUNK]), script=str(driver))
    assert rc == 3, stderr
