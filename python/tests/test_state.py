import os
import threading

import numpy as np
import pytest

from helpers import TINY_Q4, read_safetensors


def prompt(n, seed):
    return np.random.default_rng(seed).integers(0, 512, n).astype(np.int32)


def test_save_load_continues_bitwise(strata, model, tmp_path):
    ids = prompt(60, 1)
    path = tmp_path / "s.state"
    with model.session(128) as a, model.session(128) as b:
        a.prefill(ids[:40])
        a.save(path)
        b.load(str(path))
        assert b.position == 40 and np.array_equal(b.tokens, ids[:40])
        assert np.array_equal(b.prefill(ids[40:], all_logits=True), a.prefill(ids[40:], all_logits=True))


def test_state_file_reads_with_numpy(strata, model, tmp_path):
    """The file is plain safetensors: tokens and every state by layer and role."""
    ids = prompt(25, 2)
    path = tmp_path / "s.state"
    with model.session(64) as s:
        s.prefill(ids)
        s.save(path)
    t = read_safetensors(str(path))
    assert np.array_equal(t["tokens"], ids)
    assert t["layers.3.k"].shape == (25, 1, 256) and t["layers.3.v"].dtype == np.float32
    assert t["layers.0.recurrent"].shape == (6, 128, 128)
    assert t["layers.1.ple_tokens"].dtype == np.int32 and t["layers.1.ple_tokens"].shape == (2,)


def test_bad_state_files(strata, model, device, tmp_path):
    ids = prompt(30, 3)
    good = tmp_path / "good.state"
    with model.session(64) as s:
        s.prefill(ids)
        s.save(good)
    raw = good.read_bytes()
    flipped = bytearray(raw)
    flipped[len(raw) - 100] ^= 8
    cases = [("truncated", raw[:-5], strata.CheckpointError, "truncated"),
             ("flipped", bytes(flipped), strata.CheckpointError, "checksum"),
             ("not a state file", b"\x08" + b"\0" * 7 + b"{}      ", strata.CheckpointError, "not a strata session state file")]
    with model.session(64) as s:
        s.prefill(ids[:7])
        for name, data, exc, words in cases:
            p = tmp_path / (name + ".state")
            p.write_bytes(data)
            with pytest.raises(exc) as e:
                s.load(p)
            assert words in str(e.value) and str(p) in str(e.value), name
            assert s.position == 7 and np.array_equal(s.tokens, ids[:7])
    with model.session(16) as small:
        with pytest.raises(strata.CapacityError):
            small.load(good)
    other = strata.Model(device, os.path.join(os.path.dirname(TINY_Q4), "qwen3next-tiny"))
    with other.session(64) as s, pytest.raises(strata.InvalidArgumentError, match="qwen4_exp"):
        s.load(good)
    other.close()
    with model.session(64) as s, pytest.raises(strata.InvalidArgumentError):
        s.save(tmp_path / "no" / "such" / "dir" / "s.state")


def test_prompt_cache(strata, model, tmp_path):
    a = prompt(100, 4)
    b = np.concatenate([a[:70], prompt(30, 5)])
    cache = strata.PromptCache(model, dir=tmp_path / "cache", every=32)
    with model.session(128) as s, model.session(128) as ref:
        la, info = cache.prefill(s, a)
        assert info["reused"] == 0 and info["source"] == "" and info["checkpoints"] == 4
        lb, info = cache.prefill(s, b, all_logits=True)
        assert info["reused"] == 64 and info["source"] == "memory" and lb.shape == (36, 512)
        ref.prefill(b[:64], step=32)
        assert np.array_equal(lb, ref.prefill(b[64:], all_logits=True, step=32))
        again, info = cache.prefill(s, a)
        assert info["reused"] == 100 and np.array_equal(again, la)
        assert 0 < info["memory_bytes"] <= strata.DEFAULT_PROMPT_CACHE_BYTES and info["disk_checkpoints"] > 0
    # another cache on the same directory (as another process would open it)
    other = strata.PromptCache(model, dir=str(tmp_path / "cache"), every=32)
    with model.session(128) as s:
        got, info = other.prefill(s, a)
        assert info["source"] == "disk" and info["reused"] == 100 and np.array_equal(got, la)
    other.close()
    cache.close()


def test_prompt_cache_errors_and_threads(strata, model, tmp_path):
    with pytest.raises(strata.InvalidArgumentError, match="smaller than one checkpoint"):
        strata.PromptCache(model, bytes=1000)
    for empty in ("", b""):
        with pytest.raises(strata.InvalidArgumentError, match="dir is empty"):
            strata.PromptCache(model, dir=empty)
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(strata.InvalidArgumentError, match=str(f)):
        strata.PromptCache(model, dir=f / "cache")
    with pytest.raises(strata.InvalidArgumentError):
        strata.PromptCache(model, every=-1)
    cache = strata.PromptCache(model, every=16)
    common = prompt(40, 6)
    errors = []

    def work(g):
        try:
            with model.session(128) as s:
                for i in range(3):
                    p = np.concatenate([common, prompt(20, 10 * g + i)])
                    _, info = cache.prefill(s, p)
                    assert info["tokens"] == 60
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(g,)) for g in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with model.session(128) as s:
        with pytest.raises(strata.InvalidArgumentError):
            cache.prefill(s, [0, 1, 512])
        assert s.position == 0
    cache.close()
