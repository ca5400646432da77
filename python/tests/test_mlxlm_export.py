"""strata's mlx-lm prompt-cache export (Session.save_mlx_lm) continued by the float64 reference of
mlx-lm's decode step (mlxlm_ref): strata prefills the first N tokens of prompt a, writes the
cache in both formats, mlxlm_ref.load_prompt_cache reads it, and mlxlm_ref's Model decodes the
rest of the prompt from it; its logits are checked against the transformers goldens of those
positions and against mlxlm_ref continuing its own cache (made by decoding the first N tokens
one by one). Run with -s to see the measured differences."""

import json
import os
import shutil

import numpy as np
import pytest

import mlxlm_ref as R
from helpers import TESTDATA, TINY_Q4
from test_mlxlm_ref import MODELS, checkpoint, generated, golden_logits, goldens, max_diff, qwen35_goldens, stored  # noqa: F401

N = 88  # tokens strata prefills; the reference decodes positions N..95 from the exported cache
FORMATS = {"new": R.CURRENT, "legacy": R.LEGACY}
# Measured (-s), cpu and emu alike: the float32 export continued over positions 88..95 is 4.0e-6
# to 5.3e-6 from the goldens and 1.5e-6 to 5.3e-6 from the reference continuing its own cache; the
# exported states are 1.4e-5 to 2.3e-5 from the reference's (a float32 prefill against a float64
# decode); the bfloat16 export moves the logits by 4.9e-3 to 8.8e-3 (as mlxlm_ref's own bfloat16
# files do, test_mlxlm_ref.py).
TOL_GOLDEN = 1e-4  # the bound, for the float32 export
TOL_OWN_F32 = 2e-5
TOL_STATE_F32 = 5e-5
TOL_BF16 = 2e-2


@pytest.fixture(scope="module")
def ref_models(request):
    """name -> (mlxlm_ref model, its cache after decoding the first N tokens, logits of N..95)."""
    done = {}

    def get(name):
        if name not in done:
            gen = request.getfixturevalue("generated") if name != "qwen3next-tiny" else None
            g = request.getfixturevalue("goldens")
            ids = g["a.input_ids"]
            model = R.load_model(checkpoint(name, gen))
            cache = model.make_cache()
            model.decode(ids[:N], cache)
            own = model.decode(ids[N:], [_copy(e) for e in cache])
            done[name] = (model, cache, own)
        return done[name]
    return get


def _copy(e):
    if isinstance(e, R.KVCache):
        return R.KVCache(e.keys.copy(), e.values.copy())
    return R.ArraysCache(e.cache[0].copy(), e.cache[1].copy())


def _arrays(e):
    if isinstance(e, R.KVCache):
        return {"keys": e.keys, "values": e.values}
    return {"conv": e.cache[0], "recurrent": e.cache[1]}


@pytest.fixture(scope="module", params=["cpu", "emu"])
def backend(request, strata):
    if request.param == "emu" and not (os.environ.get("STRATA_CLANG") or shutil.which("clang++-16") or shutil.which("clang++")):
        pytest.skip("the emu backend needs clang++ (Debian clang-16)")
    d = strata.Device(request.param)
    yield request.param, d
    d.close()


@pytest.mark.parametrize("name", MODELS)
def test_export_continues_as_the_goldens(name, backend, strata, ref_models, goldens, qwen35_goldens, request, tmp_path):
    be, dev = backend
    gen = request.getfixturevalue("generated") if name != "qwen3next-tiny" else None
    model_ref, ref_cache, ref_logits = ref_models(name)
    ids = goldens["a.input_ids"]
    want = golden_logits(name, goldens, qwen35_goldens)[N:]
    m = strata.Model(dev, checkpoint(name, gen))
    s = strata.Session(m, max_context=128)
    try:
        s.prefill(ids[:N])
        for fmt, ref_fmt in FORMATS.items():
            for dtype in ("float32", None):
                path = str(tmp_path / f"{fmt}-{dtype}.safetensors")
                s.save_mlx_lm(path, format=fmt, dtype=dtype, model="org/" + name)
                assert R.file_format(path) == ref_fmt
                loaded = R.load_prompt_cache(path, ref_fmt)
                assert loaded.metadata == {"model": "org/" + name, "tokenizer_config": "{}"}
                act = "F32" if dtype == "float32" else "BF16"  # the test checkpoints are bfloat16
                for i, e in enumerate(loaded.cache):
                    for k, role in R._state_names(i, type(e).__name__, ref_fmt):
                        assert loaded.dtypes[k] == (act if role in ("keys", "values", "conv") else "F32"), k
                # the file is byte for byte what the reference's save_prompt_cache writes for it
                again = str(tmp_path / "again.safetensors")
                R.save_prompt_cache(again, loaded.cache, loaded.metadata, fmt=ref_fmt, activation_dtype=act)
                with open(path, "rb") as f1, open(again, "rb") as f2:
                    assert f1.read() == f2.read(), f"{fmt} {act}: the file differs from save_prompt_cache's"
                # the states against the reference's own cache
                ds = max(max_diff(a, _arrays(r)[role]) for e, r in zip(loaded.cache, ref_cache)
                         for role, a in _arrays(e).items())
                got = model_ref.decode(ids[N:], loaded.cache)
                dg, do = max_diff(got, want), max_diff(got, ref_logits)
                print(f"\n{name} {be} {fmt} {act}: states vs the reference's {ds:.3g}; positions {N}..95 "
                      f"continued from the file: max |logits - golden| {dg:.3g}, vs the reference's own cache {do:.3g}")
                if act == "F32":
                    assert dg <= TOL_GOLDEN and do <= TOL_OWN_F32 and ds <= TOL_STATE_F32
                else:
                    assert dg <= TOL_BF16 and do <= TOL_BF16
        # the bfloat16 file holds the float32 file's values rounded once to nearest even
        f32 = R.load_prompt_cache(str(tmp_path / "new-float32.safetensors"), R.CURRENT)
        bf = R.load_prompt_cache(str(tmp_path / "new-None.safetensors"), R.CURRENT)
        for a, b in zip(f32.cache, bf.cache):
            for role, x in _arrays(a).items():
                y = _arrays(b)[role]
                assert y.tobytes() == (x if role == "recurrent" else stored(x, "BF16")).tobytes(), role
    finally:
        s.close()
        m.close()


def test_export_refusals(strata, device, tmp_path):
    g = os.path.join(TESTDATA, "qwen3next-tiny")
    shifted = tmp_path / "shifted"
    shutil.copytree(g, shifted)
    cfg = json.loads((shifted / "config.json").read_text())
    cfg["full_attention_interval"] = 2  # mlx-lm would make layers 1 and 3 attention layers
    (shifted / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    out.mkdir()
    path = str(out / "c.safetensors")

    def session(d, layers=None, n=12):
        m = strata.Model(device, d, layers=layers)
        s = strata.Session(m, max_context=64)
        if n:
            kw = {"hidden": np.zeros((n, m.hidden_size), np.float32)} if layers and layers[0] > 0 else {}
            s.prefill(np.arange(n, dtype=np.int32), **kw)
        return m, s

    cases = [
        (session(TINY_Q4), {}, strata.UnsupportedError, "qwen4_exp family"),
        (session(str(shifted)), {}, strata.UnsupportedError, "layer_types makes layer 1 linear_attention"),
        (session(g, layers=(2, 4)), {}, strata.UnsupportedError, r"pipeline stage \(layers 2:4 of 4\)"),
        (session(g), {"format": "current"}, strata.InvalidArgumentError, 'format "current"'),
        (session(g), {"dtype": "bf16"}, strata.InvalidArgumentError, 'dtype "bf16"'),
        (session(g, n=0), {}, strata.InvalidArgumentError, "session is empty"),
        (session(g), {"model": 7}, strata.InvalidArgumentError, "model must be a non-empty string"),
        (session(g), {"format": ""}, strata.InvalidArgumentError, "format must be a non-empty string"),
        (session(g), {"dtype": ""}, strata.InvalidArgumentError, "dtype must be a non-empty string"),
    ]
    for (m, s), kw, err, match in cases:
        try:
            before = s.tokens
            with pytest.raises(err, match=match):
                s.save_mlx_lm(path, **kw)
            assert os.listdir(out) == [], f"{match}: files left"
            assert np.array_equal(s.tokens, before)
        finally:
            s.close()
            m.close()
    m, s = session(g)
    try:
        with pytest.raises(strata.InvalidArgumentError, match="must end in .safetensors"):
            s.save_mlx_lm(str(out / "c.bin"))
        assert os.listdir(out) == []
    finally:
        s.close()
        m.close()
