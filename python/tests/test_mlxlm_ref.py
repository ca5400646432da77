"""The float64 reference of mlx-lm's decode step (mlxlm_ref) against the transformers goldens, and
its prompt-cache files in both formats. Run with -s to see the measured differences."""

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import mlxlm_ref as R
from helpers import GOLDENS, ROOT, TESTDATA, read_safetensors

TOL = 1e-4  # max |diff| of logits and cached states against the goldens (float32 from float64 runs)
QWEN35_GOLDENS = os.path.join(ROOT, "family", "qwen35", "testdata", "goldens.safetensors")
GENERATED = ("qwen35-tiny", "qwen35moe-tiny")
MODELS = ("qwen3next-tiny",) + GENERATED


@pytest.fixture(scope="session")
def goldens():
    return read_safetensors(os.path.join(GOLDENS, "model_goldens.safetensors"))


@pytest.fixture(scope="session")
def qwen35_goldens():
    return read_safetensors(QWEN35_GOLDENS)


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """The generated Qwen3.5 checkpoints the qwen35 goldens belong to, written by modelgen's
    fixtures command and checked against the sha256 sums family/qwen35/qwen35_test.go holds."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH: cannot generate the Qwen3.5 checkpoints")
    out = tmp_path_factory.mktemp("qwen35")
    res = subprocess.run([go, "run", "./internal/modelgen/cmd/fixtures", str(out), *GENERATED], cwd=ROOT,
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"fixtures failed:\n{res.stdout}{res.stderr}")
    with open(os.path.join(ROOT, "family", "qwen35", "qwen35_test.go")) as f:
        sums = dict(re.findall(r'"(qwen35[\w-]*)":\s*"([0-9a-f]{64})"', f.read()))
    for name in GENERATED:
        with open(os.path.join(out, name, "model.safetensors"), "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        assert name in sums, f"qwen35_test.go holds no sha256 for {name}"
        assert got == sums[name], f"{name}: generated checkpoint changed (sha256 {got}, goldens made from {sums[name]})"
    return str(out)


def checkpoint(name, generated_dir):
    return os.path.join(TESTDATA, name) if name == "qwen3next-tiny" else os.path.join(generated_dir, name)


def golden_logits(name, goldens, qwen35_goldens):
    return goldens["a.logits"] if name == "qwen3next-tiny" else qwen35_goldens[name + ".a.logits"]


@pytest.fixture(scope="session")
def decoded(request, goldens, qwen35_goldens):
    """name -> (model, cache after 95 tokens of prompt a, cache after all 96, logits [96, vocab])."""
    done = {}

    def get(name):
        if name not in done:
            gen = request.getfixturevalue("generated") if name != "qwen3next-tiny" else None
            model = R.load_model(checkpoint(name, gen))
            ids = goldens["a.input_ids"]
            cache = model.make_cache()
            head = model.decode(ids[:-1], cache)
            prefix = copy.deepcopy(cache)
            last = model.step(ids[-1], cache)
            done[name] = (model, prefix, cache, np.vstack([head, last]))
        return done[name]
    return get


def stored(x, dtype):
    """x as a file of dtype holds it, widened back to float64."""
    bits = np.frombuffer(R.encode(x, dtype), {"F32": "<f4", "BF16": "<u2", "F16": "<f2"}[dtype]).reshape(x.shape)
    return R.to_float64(dtype, bits)


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


@pytest.mark.parametrize("name", MODELS)
def test_decode_token_by_token_matches_goldens(name, decoded, goldens, qwen35_goldens):
    _, _, _, logits = decoded(name)
    want = golden_logits(name, goldens, qwen35_goldens)
    assert logits.shape == want.shape == (96, 512)
    d = max_diff(logits, want)
    print(f"\n{name}: 96 decode steps from an empty cache, max |logits - golden| {d:.3g}")
    assert d <= TOL


@pytest.mark.parametrize("name", MODELS)
def test_cache_after_prompt_matches_goldens(name, decoded, goldens, qwen35_goldens):
    model, _, cache, _ = decoded(name)
    c = model.config
    for L, e in zip(model.layers, cache):
        if L.linear:
            assert e.cache[0].shape == (1, c.K - 1, c.conv_dim) and e.cache[1].shape == (1, c.Hv, c.dv, c.dk)
        else:
            assert e.keys.shape == e.values.shape == (1, c.Hkv, 96, c.hd)
    if name == "qwen3next-tiny":
        # transformers keeps the last K inputs channels-first [1, C, K]; mlx-lm the last K-1 as rows
        d = {f"conv {i}": max_diff(cache[i].cache[0][0], goldens[f"a.conv_state.{i}"][0][:, 1:].T) for i in range(3)}
        d["keys 3"] = max_diff(cache[3].keys[0], goldens["a.k_cache.3"])
        d["values 3"] = max_diff(cache[3].values[0], goldens["a.v_cache.3"])
    else:
        d = {"keys 3": max_diff(cache[3].keys[0], qwen35_goldens[name + ".a.3.keys"]),
             "values 3": max_diff(cache[3].values[0], qwen35_goldens[name + ".a.3.values"])}
    print(f"\n{name}: cache after prompt a vs goldens, max |diff|: " + ", ".join(f"{k} {v:.3g}" for k, v in d.items()))
    assert max(d.values()) <= TOL


# The floor of each golden: qwen35's are float64 runs (transformers' L2 norm brings this reference to
# float32 rounding of the goldens), qwen3next's hold float32 steps of their own (7.4e-6 measured).
HF_FLOOR = {"qwen3next-tiny": 1e-5, "qwen35-tiny": 1e-6, "qwen35moe-tiny": 1e-6}


@pytest.mark.parametrize("name", MODELS)
def test_l2norm_epsilon_is_the_only_formula_difference(name, decoded, goldens, qwen35_goldens):
    model, _, _, logits = decoded(name)
    hf = copy.copy(model)
    hf.hf_qk_l2norm = True
    got = hf.decode(goldens["a.input_ids"], hf.make_cache())
    floor = max_diff(got, golden_logits(name, goldens, qwen35_goldens))
    effect = max_diff(got, logits)
    print(f"\n{name}: transformers' L2 norm: max |logits - golden| {floor:.3g}; mlx-lm's epsilon moves the "
          f"logits by {effect:.3g}")
    assert floor <= HF_FLOOR[name]
    assert effect > 0


@pytest.mark.parametrize("dtype", ["F32", "BF16", "F16"])
@pytest.mark.parametrize("fmt", R.FORMATS)
@pytest.mark.parametrize("name", MODELS)
def test_cache_file_round_trip(name, fmt, dtype, decoded, goldens, qwen35_goldens, tmp_path):
    model, prefix, _, logits = decoded(name)
    path = str(tmp_path / "cache.safetensors")
    meta = {"model": name, "tokenizer_config": json.dumps({"trust_remote_code": False})}
    R.save_prompt_cache(path, prefix, meta, fmt=fmt, activation_dtype=dtype)
    assert R.file_format(path) == fmt
    loaded = R.load_prompt_cache(path, fmt)
    assert loaded.metadata == meta
    # read back bitwise: every array is the stored rounding of the one saved
    for i, (a, b) in enumerate(zip(prefix, loaded.cache)):
        pairs = [(a.keys, b.keys, dtype), (a.values, b.values, dtype)] if isinstance(a, R.KVCache) else \
            [(a.cache[0], b.cache[0], dtype), (a.cache[1], b.cache[1], "F32")]
        for x, y, dt in pairs:
            assert y.shape == x.shape and y.tobytes() == stored(x, dt).tobytes(), f"layer {i}"
    again = str(tmp_path / "again.safetensors")
    R.save_prompt_cache(again, loaded.cache, loaded.metadata, fmt=fmt, activation_dtype=dtype)
    with open(path, "rb") as f1, open(again, "rb") as f2:
        assert f1.read() == f2.read()
    other = R.LEGACY if fmt == R.CURRENT else R.CURRENT
    with pytest.raises(R.CacheFormatError, match=f"a {fmt} mlx-lm prompt-cache file.*not the {other} format"):
        R.load_prompt_cache(path, other)
    # continued from the file: the next token's logits against the golden row
    want = golden_logits(name, goldens, qwen35_goldens)[95]
    got = model.step(goldens["a.input_ids"][95], loaded.cache)
    d = max_diff(got, want)
    print(f"\n{name} {fmt} {dtype}: step 96 continued from the file, max |logits - golden| {d:.3g}, "
          f"vs the in-memory cache {max_diff(got, logits[95]):.3g}")
    assert d <= (TOL if dtype == "F32" else 2e-2)


def test_cache_file_layout(decoded, tmp_path):
    """Names, dtypes, shapes, spans and metadata exactly as save_prompt_cache writes them."""
    _, prefix, _, _ = decoded("qwen35-tiny")
    for fmt in R.FORMATS:
        path = str(tmp_path / f"{fmt}.safetensors")
        R.save_prompt_cache(path, prefix, {"model": "m"}, fmt=fmt)
        with open(path, "rb") as f:
            raw = f.read()
        n = int.from_bytes(raw[:8], "little")
        text = raw[8:8 + n].decode()
        header = json.loads(text)
        assert text == json.dumps(header, sort_keys=True, separators=(",", ":"))  # nlohmann's dump
        assert header.pop("__metadata__") == {"0.0": "", "0.1": "", "0.2": "", "0.3": "", "1.model": "m",
                                              "2.0": "ArraysCache", "2.1": "ArraysCache", "2.2": "ArraysCache",
                                              "2.3": "KVCache"}
        layout = {k: (v["dtype"], v["shape"]) for k, v in header.items()}
        want = {"3.0": ("BF16", [1, 2, 95, 256]), "3.1": ("BF16", [1, 2, 95, 256])}
        for i in range(3):
            if fmt == R.CURRENT:
                want.update({f"{i}.0.0": ("BF16", [1, 3, 1024]), f"{i}.0.1": ("F32", [1, 4, 128, 128]),
                             f"{i}.1": ("F32", [0]), f"{i}.2": ("F32", [0])})
            else:
                want.update({f"{i}.0": ("BF16", [1, 3, 1024]), f"{i}.1": ("F32", [1, 4, 128, 128])})
        assert layout == want
        spans = sorted(tuple(v["data_offsets"]) for v in header.values())
        assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert spans[-1][1] == len(raw) - 8 - n


def test_cache_file_refusals(decoded, tmp_path):
    model, prefix, _, _ = decoded("qwen35-tiny")
    path = str(tmp_path / "c.safetensors")
    R.save_prompt_cache(path, prefix, fmt=R.CURRENT, activation_dtype="F32")
    tensors, meta, _ = R.read_safetensors(path)
    t64 = {k: (dt, R.to_float64(dt, a)) for k, (dt, a) in tensors.items()}

    def rewrite(tensors=t64, meta=meta):
        p = str(tmp_path / "bad.safetensors")
        R.write_safetensors(p, tensors, meta)
        return p

    with pytest.raises(R.CacheFileError, match="MambaCache"):
        R.load_prompt_cache(rewrite(meta={**meta, "2.0": "MambaCache"}))
    with pytest.raises(R.CacheFileError, match="RotatingKVCache"):
        R.load_prompt_cache(rewrite(meta={**meta, "2.3": "RotatingKVCache"}))
    with pytest.raises(R.CacheFileError, match="tensor 1.0.1 missing"):
        R.load_prompt_cache(rewrite({k: v for k, v in t64.items() if k != "1.0.1"}))
    with pytest.raises(R.CacheFileError, match="left_padding"):
        R.load_prompt_cache(rewrite({**t64, "2.1": ("F32", np.zeros(1))}))
    with pytest.raises(R.CacheFileError, match="metadata 0.2"):
        R.load_prompt_cache(rewrite(meta={**meta, "0.2": "4"}))
    with pytest.raises(R.CacheFileError, match="ends in .safetensors"):
        R.save_prompt_cache(str(tmp_path / "c.bin"), prefix)
    with pytest.raises(R.CacheFileError, match="metadata 'a.b'"):
        R.save_prompt_cache(path, prefix, {"a.b": "x"})
    with pytest.raises(R.CacheMismatchError, match="cache has 3 layers"):
        model.step(1, prefix[:3])
    bad = copy.deepcopy(prefix)
    bad[0].cache[1] = bad[0].cache[1].transpose(0, 1, 3, 2)[:, :, :64]  # [1, Hv, Dk, Dv]-like
    with pytest.raises(R.CacheMismatchError, match="layer 0: recurrent state"):
        model.step(1, bad)


def test_gated_delta_state_axis_order():
    """From a zero state one step leaves M = beta v k^T: rows follow Dv, columns Dk (mlx-lm's
    [Hv, Dv, Dk]); shown with Dk != Dv and two value heads reading one key head."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 3)), rng.standard_normal((1, 3))
    v, beta = rng.standard_normal((2, 2)), np.array([0.3, 0.8])
    y, M = R.gated_delta_step(q, k, v, np.array([0.5, 0.9]), beta, np.zeros((2, 2, 3)))
    assert M.shape == (2, 2, 3)
    for h in range(2):
        np.testing.assert_allclose(M[h], beta[h] * np.outer(v[h], k[0]), rtol=1e-15)
        np.testing.assert_allclose(y[h], M[h] @ q[0], rtol=1e-15)


def test_bf16_rounds_once_to_nearest_even():
    one, ulp = 1.0, 2.0 ** -7  # bfloat16 spacing at 1
    x = np.array([one + ulp / 2, one + ulp / 2 + 2.0 ** -40, one + 1.5 * ulp, -(one + ulp / 2 + 2.0 ** -40),
                  one + ulp / 2 - 2.0 ** -40])
    got = R.to_float64("BF16", np.frombuffer(R.encode(x, "BF16"), "<u2"))
    # ties to even; just above a tie up (float32 alone would land on the tie and round down)
    np.testing.assert_array_equal(got, [one, one + ulp, one + 2 * ulp, -(one + ulp), one])
