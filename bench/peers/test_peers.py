"""Tests of peers.py with stand-in engines: small scripts that answer like llama-bench (-o json)
and like strata's --bench, with known speeds, so that the paired ratios, the choice of each
engine's fastest configuration, the early end of strata's --bench and the accuracy column can be
checked against values worked out by hand.

    /usr/bin/python3 -m pytest -q bench/peers/test_peers.py
"""

import json
import os
import stat
import struct
import sys
import textwrap
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

# tokens/s of the n-th run (n = 0, 1, ...) of each configuration: BASE * (n + 1), so that every
# paired ratio of a round is the ratio of the bases whatever the round.
FAKE_BENCH = textwrap.dedent("""\
    #!/usr/bin/python3
    import json, os, sys
    a = sys.argv[1:]
    kind = {kind!r}
    T = int(a[a.index("-p") + 1])
    cfg = kind + ("-rtr" + a[a.index("-rtr") + 1] if "-rtr" in a else "")
    base = {{"ik-rtr0": 100.0, "ik-rtr1": 120.0, "llama": 50.0}}[cfg]
    cnt = os.path.join(os.path.dirname(os.path.abspath(__file__)), cfg + "-" + str(T) + ".count")
    n = int(open(cnt).read()) if os.path.exists(cnt) else 0
    open(cnt, "w").write(str(n + 1))
    assert a[a.index("-t") + 1] == "3" and a[a.index("-r") + 1] == "1" and a[a.index("-n") + 1] == "0"
    print(json.dumps([{{"n_prompt": T, "n_gen": 0, "avg_ts": base * (n + 1), "build_commit": "fake"}}]))
    """)

FAKE_STRATA = textwrap.dedent("""\
    #!/usr/bin/python3
    import os, sys, time
    import numpy as np
    a = sys.argv[1:]
    mode = a[a.index("--compute") + 1]
    if "--save-logits" in a:
        g = np.arange(12, dtype=np.float32).reshape(3, 4)
        g[1, 2] += {{"f32": 0.0, "int8": 0.5, "bf16": 0.125}}[mode]
        np.save(a[a.index("--save-logits") + 1], g if "--all-logits" in a else g[-1])
        sys.exit(0)
    assert os.environ["GOMAXPROCS"] == "3"
    base = {{"f32": 60.0, "int8": 150.0, "bf16": 40.0}}[mode]
    Ts = [int(t) for t in a[a.index("--bench-tokens") + 1].split(",")]
    cnt = os.path.join({tmp!r}, "strata-" + mode + "-" + os.path.basename(a[a.index("--model") + 1]) + "-" + str(Ts[-1]) + ".count")
    n = int(open(cnt).read()) if os.path.exists(cnt) else 0
    open(cnt, "w").write(str(n + 1))
    print("model     fake", flush=True)
    for T in Ts:
        print("slice pos0=0     T=%-5d %8.1f tokens/s  1.00x the first run's time per token" % (T, base * (n + 1) if T == Ts[-1] else 1.0), flush=True)
        print("  GEMM   1.0 ms  100.0%", flush=True)
    time.sleep(600)  # --bench goes on to other models: peers.py must end it
    """)


def write_exe(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def write_safetensors(path, tensors):
    head, blobs, off = {}, [], 0
    for k, v in tensors.items():
        v = np.ascontiguousarray(v)
        dt = {np.dtype("<f4"): "F32", np.dtype("<i4"): "I32"}[v.dtype]
        b = v.tobytes()
        head[k] = {"dtype": dt, "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(head).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


@pytest.fixture
def setup(tmp_path):
    t = str(tmp_path)
    write_exe(os.path.join(t, "ik", "bin", "llama-bench"), FAKE_BENCH.format(kind="ik"))
    write_exe(os.path.join(t, "llama", "bin", "llama-bench"), FAKE_BENCH.format(kind="llama"))
    write_exe(os.path.join(t, "strata.py"), FAKE_STRATA.format(tmp=t))
    gguf = os.path.join(t, "m-Q4_0.gguf")
    with open(gguf, "wb") as f:
        f.write(b"GGUF" + bytes(60))
    golden = np.arange(12, dtype=np.float32).reshape(3, 4)
    write_safetensors(os.path.join(t, "goldens.safetensors"), {"input_ids": np.array([5, 6, 7], dtype=np.int32), "m-Q4_0.logits": golden})
    peer = golden[-1].copy()
    peer[0] -= 0.25
    np.save(os.path.join(t, "peer.npy"), peer)
    return t, gguf


def test_end_to_end(setup, capsys):
    t, gguf = setup
    out = os.path.join(t, "out.json")
    t0 = time.monotonic()
    rc = peers.main(["--gguf", gguf, "--ik", os.path.join(t, "ik"), "--llama", os.path.join(t, "llama"),
                     "--strata", f"{sys.executable} {os.path.join(t, 'strata.py')}", "--tokens", "128,256",
                     "--threads", "3", "--rounds", "3", "--goldens", os.path.join(t, "goldens.safetensors"),
                     "--peer-logits", f"llama.cpp={os.path.join(t, 'peer.npy')}", "--json", out])
    assert rc == 0
    assert time.monotonic() - t0 < 120, "strata's --bench was not ended after its line"
    r = json.load(open(out))
    assert len(r["runs"]) == 3 * 2 * (2 + 1 + 3)  # rounds x T x (ik rtr 0/1, llama, strata 3 modes)
    # Every configuration ran once per round at each T, in a rotated order.
    orders = [[x["engine"] + x["config"] for x in r["runs"] if x["round"] == k and x["T"] == 128] for k in range(3)]
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1]
    for s in r["summary"]:
        assert s["fastest"] == {"ik_llama.cpp": "ik_llama.cpp fa1-fmoe1-rtr1 m-Q4_0.gguf", "llama.cpp": "llama.cpp repack m-Q4_0.gguf",
                                "strata": "strata int8 m-Q4_0.gguf"}
        rows = {x["key"]: x for x in s["rows"]}
        want = {"strata int8": (150 / 120, 150 / 50), "strata f32": (60 / 120, 60 / 50), "strata bf16": (40 / 120, 40 / 50),
                "ik_llama.cpp fa1-fmoe1-rtr0": (100 / 120, 100 / 50)}
        for k, (ik, ll) in want.items():
            row = rows[k + " m-Q4_0.gguf"]
            for eng, v in (("ik_llama.cpp", ik), ("llama.cpp", ll)):
                st = row["ratio_to"][eng]
                assert st["median"] == pytest.approx(v) and st["min"] == pytest.approx(v) and st["max"] == pytest.approx(v)
        assert rows["strata int8 m-Q4_0.gguf"]["ratio_to_same_file"]["ik_llama.cpp"]["median"] == pytest.approx(150 / 120)
        assert set(rows["ik_llama.cpp fa1-fmoe1-rtr1 m-Q4_0.gguf"]["ratio_to_same_file"]) == {"llama.cpp"}  # not to itself
        assert rows["ik_llama.cpp fa1-fmoe1-rtr1 m-Q4_0.gguf"]["ratio_to_same_file"]["llama.cpp"]["max"] == pytest.approx(120 / 50)
        # tokens/s of the three rounds: base x 1, 2, 3.
        assert rows["strata int8 m-Q4_0.gguf"]["tokens_per_s"]["median"] == pytest.approx(300.0)
        assert rows["llama.cpp repack m-Q4_0.gguf"]["ratio_to"]["ik_llama.cpp"]["median"] == pytest.approx(50 / 120)
    acc = {(a["engine"], a["config"]): a for a in r["accuracy"]}
    assert acc[("strata", "f32")]["max_abs"] == 0 and acc[("strata", "f32")]["rows"] == "all"
    assert acc[("strata", "int8")]["max_abs"] == pytest.approx(0.5) and acc[("strata", "int8")]["n_rows"] == 3
    assert acc[("strata", "bf16")]["max_abs"] == pytest.approx(0.125)
    assert acc[("llama.cpp", "(given logits)")]["max_abs"] == pytest.approx(0.25) and acc[("llama.cpp", "(given logits)")]["rows"] == "last"
    text = capsys.readouterr().out
    assert "1.25x (1.25-1.25)" in text and "3.00x (3.00-3.00)" in text


def test_bad_input(setup):
    t, gguf = setup
    notgguf = os.path.join(t, "x.gguf")
    with open(notgguf, "wb") as f:
        f.write(b"NOPE")
    for args, msg in [
        (["--gguf", notgguf], "not a GGUF file"),
        (["--gguf", gguf, "--ik", t], "no bin/llama-bench"),
        (["--gguf", gguf, "--strata-compute", "int4"], "int4"),
        (["--gguf", gguf, "--tokens", "512,512"], "repeated"),
        (["--gguf", gguf, "--tokens", "64"], "--strata-warmup 64 equals a T"),
        (["--gguf", gguf, "--peer-logits", "llama.cpp=x.npy"], "needs --goldens"),
        (["--gguf", gguf, "--checkpoint", t], "no config.json"),
    ]:
        with pytest.raises(peers.Fail, match=msg):
            peers.parse_args(args)


def test_compare_rows():
    g = np.zeros((2, 3))
    x = np.array([[0, 1, 0], [0.5, 0, 0]])
    r = peers.compare(x, g, "t")
    assert r["rows"] == "all" and r["max_abs"] == 1 and r["mean_abs"] == pytest.approx(1.5 / 6)
    assert r["argmax_agree"] == 0.5  # row 0's argmax moves to 1; row 1's stays 0
    r = peers.compare(x[-1], g, "t")
    assert r["rows"] == "last" and r["max_abs"] == 0.5
    with pytest.raises(peers.Fail, match="against goldens"):
        peers.compare(np.zeros((3, 3)), g, "t")
