import os

import numpy as np
import pytest

from helpers import TINY_Q4

TOL = 2e-3  # max |diff| of logits against the transformers goldens


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def test_model_info(model, device):
    assert device.info()["backend"] == "cpu"
    assert model.arch == "qwen4_exp" and model.vocab == 512 and model.layers == 4
    assert "4 layers" in model.describe()


def test_prefill_all_logits_matches_goldens(model, q4_goldens):
    ids, want = q4_goldens["a.input_ids"], q4_goldens["a.logits"]
    assert ids.shape == (96,) and want.shape == (96, 512)
    with model.session() as s:
        got = s.prefill(ids, all_logits=True)
        assert got.shape == (96, 512) and got.dtype == np.float32
        assert max_diff(got, want) <= TOL
        assert s.position == 96


def test_split_prefill_snapshot_restore(model, q4_goldens):
    ids, want = q4_goldens["a.input_ids"], q4_goldens["a.logits"]
    with model.session(128) as s, model.session(96) as s2:
        head = s.prefill(ids[:37], all_logits=True)
        snap = s.snapshot()
        assert snap.position == 37
        tail = s.prefill(ids[37:], all_logits=True)
        assert max_diff(np.concatenate([head, tail]), want) <= TOL
        s2.restore(snap)
        again = s2.prefill(ids[37:], all_logits=True)
        assert np.array_equal(again, tail)  # bitwise: same state, same work
        snap.close()


def test_token_by_token_matches_goldens(model, q4_goldens):
    # The decode-like path a generation loop takes: 96 one-token prefills.
    ids, want = q4_goldens["a.input_ids"], q4_goldens["a.logits"]
    with model.session(96) as s:
        rows = np.stack([s.prefill(ids[t:t + 1]) for t in range(len(ids))])
    assert max_diff(rows, want) <= TOL


def test_last_logits_and_one_shot(strata, model, q4_goldens):
    ids, want = q4_goldens["a.input_ids"], q4_goldens["a.logits"]
    with model.session() as s:
        last = s.prefill(ids)
    assert last.shape == (512,)
    assert max_diff(last, want[-1]) <= TOL
    one = strata.prefill(TINY_Q4, ids[:50], all_logits=True)
    assert max_diff(one, want[:50]) <= TOL


def test_example_scripts(libpath, q4_goldens, tmp_path):
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, STRATA_LIBRARY=libpath, PYTHONPATH=os.path.join(root, "python"))
    ids = q4_goldens["a.input_ids"]
    out = tmp_path / "logits.npy"
    res = subprocess.run([sys.executable, os.path.join(root, "examples", "python", "prefill.py"),
                          "--model", TINY_Q4, "--tokens", ",".join(map(str, ids)), "--chunk", "37",
                          "--all-logits", "--save-logits", str(out)],
                         env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "backend   cpu" in res.stdout
    assert max_diff(np.load(out), q4_goldens["a.logits"]) <= TOL
    res = subprocess.run([sys.executable, os.path.join(root, "examples", "python", "generate.py"),
                          "--model", TINY_Q4, "--tokens", ",".join(map(str, ids[:20])), "--new-tokens", "8"],
                         env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    # Greedy: the first new token is the argmax of the logits after the prompt, which for a
    # 20-token prefix of prompt a is row 19 of the goldens (when the top two are not a near tie).
    row = q4_goldens["a.logits"][19]
    top2 = np.sort(row)[-2:]
    generated = [int(x) for x in res.stdout.split("generated ")[1].split()]
    assert len(generated) == 8
    if top2[1] - top2[0] > 1e-3:
        assert generated[0] == int(np.argmax(row)), res.stdout


@pytest.mark.parametrize("tokens,message", [
    ("1,,2", "--tokens: empty entry in the token list (after 1 id)"),
    ("1,a", "--tokens: token 'a' (prompt index 1) is not an integer"),
    ("4294967297", "token ids do not fit in int32"),  # not wrapped to 1
    ("1,512", "token 512 at index 1 is outside [0, 512)"),
])
def test_generate_script_refusals(libpath, tokens, message):
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, STRATA_LIBRARY=libpath, PYTHONPATH=os.path.join(root, "python"))
    res = subprocess.run([sys.executable, os.path.join(root, "examples", "python", "generate.py"),
                          "--model", TINY_Q4, "--tokens", tokens, "--new-tokens", "2"],
                         env=env, capture_output=True, text=True)
    assert res.returncode != 0 and message in res.stderr, res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_steps_equal_calls_of_that_size(strata, model, q4_goldens):
    ids = q4_goldens["a.input_ids"]
    assert strata.DEFAULT_STEP == model._lib.strata_prefill_default_params().step
    with model.session() as s, model.session() as ref:
        got = s.prefill(ids, all_logits=True, step=25)
        want = np.concatenate([ref.prefill(ids[at:at + 25], all_logits=True, step=0) for at in range(0, len(ids), 25)])
        assert np.array_equal(got, want)  # bitwise: the same work
        for bad in (-1, 1.5, True, "8"):
            with pytest.raises(strata.InvalidArgumentError):
                s.prefill(ids[:4], step=bad)
        assert s.position == len(ids)


def test_pipeline_stages(strata, device, model, q4_goldens):
    ids = q4_goldens["a.input_ids"][:40]
    with model.session() as s:
        want = s.prefill(ids, all_logits=True, step=16)
    L = model.layers
    for k in range(1, L):
        first = strata.Model(device, TINY_Q4, layers=(0, k))
        second = strata.Model(device, TINY_Q4, layers=(k, L))
        assert first.layer_range == (0, k) and second.layer_range == (k, L) and first.hidden_size == second.hidden_size
        with first.session() as s1, second.session() as s2:
            h = s1.prefill(ids, step=16)
            assert h.shape == (len(ids), first.hidden_size) and h.dtype == np.float32
            with pytest.raises(strata.InvalidArgumentError):
                s2.prefill(ids, all_logits=True)  # no hidden
            with pytest.raises(strata.ShapeError):
                s2.prefill(ids, hidden=h[:-1])
            bad = h.copy()
            bad[3, 7] = np.inf
            with pytest.raises(strata.InvalidArgumentError):
                s2.prefill(ids, hidden=bad)
            assert s2.position == 0
            got = s2.prefill(ids, all_logits=True, step=16, hidden=h)
            assert np.array_equal(got, want)  # bitwise: the same work, split over two models
        first.close()
        second.close()
    with model.session() as s:
        with pytest.raises(strata.InvalidArgumentError):
            s.prefill(ids, hidden=np.zeros((len(ids), 64), np.float32))
    for bad in ((2, 1), (0, L + 1), (-1, 2), (1,), "0,2", (0.0, 1)):
        with pytest.raises(strata.InvalidArgumentError):
            strata.Model(device, TINY_Q4, layers=bad)


def test_compute_modes(strata, device, q4_goldens):
    """Model(compute=...): each mode loads and says what ran; the tiny model's weights are bf16,
    which int8 mode runs in f32 (bitwise the default logits) and bf16 mode through the bf16
    kernels (within its rounding of the goldens); bad names are refused."""
    ids, want = q4_goldens["a.input_ids"], q4_goldens["a.logits"]
    logits = {}
    for mode in ("f32", "bf16", "int8"):
        with strata.Model(device, TINY_Q4, compute=mode) as m:
            assert m.compute_report().startswith(mode)
            if mode == "int8":
                assert "f32 for BF16 (int8 would requantize the weights)" in m.compute_report()
            with m.session() as s:
                logits[mode] = s.prefill(ids, all_logits=True)
    assert np.array_equal(logits["int8"], logits["f32"])
    assert max_diff(logits["f32"], want) <= TOL
    assert 0 < max_diff(logits["bf16"], want) <= 0.5
    for bad in ("fp16", "INT8", "", None, 8):
        with pytest.raises(strata.InvalidArgumentError, match="compute"):
            strata.Model(device, TINY_Q4, compute=bad)


def test_compute_refused_by_the_c_abi(strata, device):
    """strata_model_params.compute with another name is INVALID_ARGUMENT naming it (the C check,
    under Python's own)."""
    import ctypes
    from strata.errors import check
    lib = device._lib
    p = lib.strata_model_default_params()
    p.compute = b"fp16"
    h = ctypes.c_void_p()
    st = lib.strata_model_load(device._h, os.fsencode(TINY_Q4), ctypes.byref(p), ctypes.byref(h))
    with pytest.raises(strata.InvalidArgumentError, match='compute mode "fp16"'):
        check(st, lib)
    assert h.value is None
