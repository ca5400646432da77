"""Model("x.gguf"): a llama.cpp GGUF file loads through the C ABI's strata_model_load, the same Go
loader as a checkpoint directory. The reference is internal/gguf/testdata/goldens.py's float64
forward on the values the file holds (its own GGUF reader, the converter's transforms inverted),
computed here."""
import os
import sys

import numpy as np
import pytest

from helpers import ROOT

FIXTURES = os.path.join(ROOT, "internal", "gguf", "testdata")
sys.path.insert(0, FIXTURES)

import goldens  # noqa: E402


@pytest.mark.parametrize("name", ["qwen35-BF16", "qwen35moe-BF16", "qwen3next-BF16", "qwen35-Q4_K_M", "qwen35moe-MXFP4_MOE"])
def test_model_gguf_matches_float64(strata, device, name):
    path = os.path.join(FIXTURES, name + ".gguf")
    want = goldens.logits_of(path, None, [])[1]
    ids = np.array(goldens.PROMPT, dtype=np.int32)
    m = strata.Model(device, path)
    try:
        assert m.layers == 2 and m.vocab == 128
        with m.session(128) as s:
            head = s.prefill(ids[:37], all_logits=True)
            tail = s.prefill(ids[37:], all_logits=True)
        got = np.concatenate([head, tail])
        assert got.shape == want.shape
        assert float(np.max(np.abs(got.astype(np.float64) - want))) <= 1e-4
    finally:
        m.close()


def test_model_gguf_refused(strata, device, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + (2).to_bytes(4, "little") + bytes(16))
    with pytest.raises(strata.CheckpointError, match="GGUF version 2"):
        strata.Model(device, str(bad))
