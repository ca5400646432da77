"""Test helpers: a minimal safetensors reader (numpy only) and paths to the test data."""

import json
import os
import struct

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(ROOT, "testdata")
TINY_Q4 = os.path.join(TESTDATA, "qwen4exp-tiny")
GOLDENS = os.path.join(TESTDATA, "goldens")

_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8,
           "BF16": np.uint16}


def read_safetensors(path):
    """Returns {name: array} for a safetensors file: an 8-byte little-endian header length, a
    JSON header {name: {dtype, shape, data_offsets}}, then the data. BF16 tensors are widened to
    float32 (their bits are the top half of a float32's)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    body = memoryview(raw)[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: {name}: dtype {e['dtype']} not supported by this reader")
        begin, end = e["data_offsets"]
        a = np.frombuffer(body[begin:end], dtype=np.dtype(_DTYPES[e["dtype"]]).newbyteorder("<"))
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.reshape(e["shape"]).astype(a.dtype.newbyteorder("="))
    return out


def rel_err(got, want):
    """max |got - want| relative to max |want|."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
