#!/usr/bin/python3
"""Prefill speed of strata, ik_llama.cpp and llama.cpp side by side on the same GGUF file.

Runs each engine's fastest CPU configuration on the same weights, one fresh process per run,
interleaved (every configuration once per round, the order rotated each round), the files read
into the page cache before each run, and prints per T a table of tokens/s with the paired
per-round ratios to each peer's fastest configuration (median, min, max), with the accuracy of
each engine beside it where it is known. See README.md beside this file for the method and an
example.

Engines and configurations (all with the same thread count):
  ik_llama.cpp  llama-bench -p T -n 0 -r 1 -fa 1 -fmoe 1 -rtr R (R in --ik-rtr, default 0 and 1)
  llama.cpp     llama-bench -p T -n 0 -r 1 (its repacked CPU types, CPU_REPACK, are on by default)
  strata        the CLI's --bench on --model FILE, --compute M for M in --strata-compute (default
                f32, int8, bf16), on every GGUF file and on the --checkpoint folder (the MLX or
                Hugging Face form of the same weights)

Timing: llama-bench's tokens/s of its one timed run (-r 1) after its own warm-up run (llama.cpp's
of the same size, ik_llama.cpp's of one token); strata's "slice pos0=0 T=..." line of --bench, after a --strata-warmup run of a few tokens
in the same process (it pages the mapped weights in, as llama-bench's warm-up does). Peak RSS is
the process's (wait4's ru_maxrss), the warm-up included.

Accuracy: strata's logits of the --goldens prompt (CLI --tokens ... --all-logits --save-logits)
against the goldens, per file and compute mode; the peers' from logits files the user gives with
--peer-logits (this script runs no peer for accuracy: llama-bench computes no logits).

Needs Python 3.9+ and numpy only. Writes no file except --json (whole, through a temporary).
"""

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRATA_COMPUTE = ("f32", "int8", "bf16")


class Fail(Exception):
    """A bad argument or a failed run: the message names the flag, file or command."""


# ---------------------------------------------------------------------------------------------
# Arguments


def parse_int_list(flag, s, lo=1):
    out = []
    for f in s.split(","):
        f = f.strip()
        try:
            v = int(f)
        except ValueError:
            raise Fail(f"{flag} {s!r}: {f!r} is not an integer")
        if v < lo:
            raise Fail(f"{flag} {s!r}: {v} is below {lo}")
        out.append(v)
    if len(set(out)) != len(out):
        raise Fail(f"{flag} {s!r}: repeated value")
    return out


def find_bench(flag, path):
    """The llama-bench binary of a build: path itself, or PATH/bin/llama-bench."""
    if path is None:
        return None
    if os.path.isdir(path):
        cand = os.path.join(path, "bin", "llama-bench")
        if not os.path.isfile(cand):
            raise Fail(f"{flag} {path}: no bin/llama-bench in this build folder (build the llama-bench target)")
        path = cand
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise Fail(f"{flag} {path}: not an executable file")
    return os.path.abspath(path)


def default_strata_command():
    """`go run ./cmd/strata` where the repository has it, else the older `go run ./examples/prefill`."""
    if os.path.isdir(os.path.join(REPO, "cmd", "strata")):
        return "go run ./cmd/strata"
    return "go run ./examples/prefill"


def build_strata(cmd, tmp):
    """The strata command as an argv. `go run PKG ARGS...` is built once (go build -o, in the
    repository) and its binary run instead, so that no run pays go's build check and the peak RSS
    is strata's own."""
    argv = shlex.split(cmd)
    if not argv:
        raise Fail("--strata is empty")
    if len(argv) >= 3 and argv[0] == "go" and argv[1] == "run" and not argv[2].startswith("-"):
        out = os.path.join(tmp, "strata")
        b = subprocess.run(["go", "build", "-o", out, argv[2]], cwd=REPO, capture_output=True, text=True)
        if b.returncode != 0:
            raise Fail(f"--strata {cmd!r}: go build -o {out} {argv[2]} (in {REPO}) failed:\n{b.stderr.strip()}")
        return [out] + argv[3:], f"go build -o strata {argv[2]} (in the repository), then strata {' '.join(argv[3:])}".strip()
    return argv, cmd


def model_files(path):
    """The files of a GGUF file or of a checkpoint folder (its regular files, not recursing)."""
    if os.path.isdir(path):
        fs = sorted(os.path.join(path, n) for n in os.listdir(path))
        return [f for f in fs if os.path.isfile(f)]
    return [path]


def preread(paths):
    """Reads every byte of paths, so that the run finds them in the page cache. Returns bytes read."""
    n = 0
    buf = bytearray(16 << 20)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                k = f.readinto(buf)
                if not k:
                    break
                n += k
    return n


def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) << 10
    except OSError:
        pass
    return None


def cpu_info():
    info = {"logical_cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        m = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
        info["model_name"] = m.group(1).strip() if m else None
        for key in ("cpu family", "model"):
            m = re.search(rf"^{key}\s*:\s*(.*)$", text, re.M)
            info[key.replace(" ", "_")] = m.group(1).strip() if m else None
        m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
        flags = set(m.group(1).split()) if m else set()
        info["simd"] = sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c")))
    except OSError:
        pass
    return info


# ---------------------------------------------------------------------------------------------
# Runs


class Config:
    """One engine configuration: how to run it on one model at one T."""

    def __init__(self, engine, name, model, argv_for_T, parse, files):
        self.engine, self.name, self.model = engine, name, model
        self.argv_for_T, self.parse, self.files = argv_for_T, parse, files

    @property
    def key(self):
        return f"{self.engine} {self.name} {os.path.basename(self.model.rstrip('/'))}"


def run_process(argv, env, stop=None, timeout=None):
    """Runs argv; returns (rc, stdout, stderr, peak RSS bytes, seconds). stop(stdout so far) ->
    True ends the process (SIGKILL) once it has printed what is needed."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errf, env=env)
        out = []
        killed = False
        for line in iter(p.stdout.readline, b""):
            out.append(line.decode(errors="replace"))
            if stop is not None and not killed and stop("".join(out)):
                p.send_signal(signal.SIGKILL)
                killed = True
            if timeout is not None and time.monotonic() - t0 > timeout and not killed:
                p.send_signal(signal.SIGKILL)
                killed = True
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        errf.seek(0)
        err = errf.read().decode(errors="replace")
    rc = 0 if (killed and stop is not None and stop("".join(out))) else p.returncode
    return rc, "".join(out), err, ru.ru_maxrss << 10, time.monotonic() - t0


def llama_bench_parse(T):
    def parse(out):
        try:
            rows = json.loads(out)
        except json.JSONDecodeError as e:
            raise Fail(f"llama-bench -o json printed no JSON ({e}); its stdout began {out[:200]!r}")
        rows = [r for r in rows if r.get("n_prompt") == T and r.get("n_gen") == 0]
        if len(rows) != 1:
            raise Fail(f"llama-bench -o json: want one test of n_prompt {T}, n_gen 0; got {len(rows)}")
        r = rows[0]
        info = {k: r.get(k) for k in ("build_commit", "build_number", "cpu_info", "model_type", "model_size",
                                      "n_threads", "n_batch", "n_ubatch", "type_k", "type_v")}
        return float(r["avg_ts"]), info
    return parse


STRATA_LINE = re.compile(r"^slice pos0=\s*(\d+)\s+T=\s*(\d+)\s+([0-9.]+) tokens/s", re.M)


def strata_parse(T):
    def parse(out):
        for m in STRATA_LINE.finditer(out):
            if int(m.group(1)) == 0 and int(m.group(2)) == T:
                info = {}
                mm = re.search(r"^compute\s+(.*)$", out, re.M)
                if mm:
                    info["compute"] = mm.group(1).strip()
                mm = re.search(r"^kernels\s+(.*)$", out, re.M)
                if mm:
                    info["kernels"] = mm.group(1).strip()
                return float(m.group(3)), info
        raise Fail(f"strata --bench printed no 'slice pos0=0 T={T}' line; its stdout ended {out[-400:]!r}")
    return parse


def strata_done(T):
    return lambda out: any(int(m.group(1)) == 0 and int(m.group(2)) == T for m in STRATA_LINE.finditer(out))


def make_configs(a, strata_argv):
    cfgs = []
    if a.ik:
        for rtr in a.ik_rtr:
            for g in a.gguf:
                def argv(T, g=g, rtr=rtr):
                    return [a.ik, "-m", g, "-p", str(T), "-n", "0", "-r", "1", "-t", str(a.threads),
                            "-fa", "1", "-fmoe", "1", "-rtr", str(rtr), "-o", "json"] + shlex.split(a.ik_args)
                cfgs.append(Config("ik_llama.cpp", f"fa1-fmoe1-rtr{rtr}", g, argv, llama_bench_parse, [g]))
    if a.llama:
        for g in a.gguf:
            def argv(T, g=g):
                return [a.llama, "-m", g, "-p", str(T), "-n", "0", "-r", "1", "-t", str(a.threads),
                        "-o", "json"] + shlex.split(a.llama_args)
            cfgs.append(Config("llama.cpp", "repack", g, argv, llama_bench_parse, [g]))
    if strata_argv:
        models = list(a.gguf) + ([a.checkpoint] if a.checkpoint else [])
        for mode in a.strata_compute:
            for m in models:
                def argv(T, m=m, mode=mode):
                    tokens = f"{a.strata_warmup},{T}" if a.strata_warmup else str(T)
                    return strata_argv + ["--bench", "--model", m, "--compute", mode, "--bench-tokens", tokens,
                                          "--bench-op-tokens", str(a.strata_op_tokens), "--bench-reps", "1"] + shlex.split(a.strata_args)
                cfgs.append(Config("strata", mode, m, argv, strata_parse, model_files(m)))
    return cfgs


def env_for(cfg, threads):
    env = dict(os.environ)
    if cfg.engine == "strata":
        env["GOMAXPROCS"] = str(threads)
    env.setdefault("OMP_NUM_THREADS", str(threads))
    return env


# ---------------------------------------------------------------------------------------------
# Accuracy


SAFETENSORS_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I32": "<i4", "I64": "<i8"}


def read_safetensors(path, key):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        if key not in head:
            raise Fail(f"{path}: no tensor {key!r} (have {', '.join(k for k in head if k != '__metadata__')})")
        t = head[key]
        if t["dtype"] == "BF16":
            raw = np.frombuffer(read_range(f, 8 + n, t["data_offsets"]), dtype="<u2").astype(np.uint32) << 16
            return raw.view(np.float32).reshape(t["shape"])
        if t["dtype"] not in SAFETENSORS_DTYPES:
            raise Fail(f"{path}: tensor {key!r} has dtype {t['dtype']} (want F32, F64, F16, BF16, I32 or I64)")
        return np.frombuffer(read_range(f, 8 + n, t["data_offsets"]), dtype=SAFETENSORS_DTYPES[t["dtype"]]).reshape(t["shape"])


def read_range(f, base, offs):
    f.seek(base + offs[0])
    b = f.read(offs[1] - offs[0])
    if len(b) != offs[1] - offs[0]:
        raise Fail(f"{f.name}: tensor data cut short")
    return b


def read_array(spec, stem):
    """FILE.npy or FILE.safetensors:KEY ({stem} in KEY replaced by the model's file stem)."""
    path, key = spec, None
    if ".safetensors:" in spec:
        path, key = spec.split(".safetensors:", 1)
        path += ".safetensors"
        key = key.replace("{stem}", stem)
    if not os.path.isfile(path):
        raise Fail(f"{spec}: no such file {path}")
    if path.endswith(".npy"):
        return np.load(path, allow_pickle=False)
    if key is None:
        raise Fail(f"{spec}: a .safetensors file needs :KEY (the tensor's name)")
    return read_safetensors(path, key)


def compare(logits, golden, what):
    """Max and mean |logits - golden| and argmax agreement over the rows both have: every row when
    both are [N, V], else the last row."""
    logits = np.asarray(logits, dtype=np.float64)
    golden = np.asarray(golden, dtype=np.float64)
    if logits.ndim == 2 and golden.ndim == 2:
        if logits.shape != golden.shape:
            raise Fail(f"{what}: logits {logits.shape} against goldens {golden.shape}")
        rows = "all"
    else:
        logits = logits.reshape(-1, logits.shape[-1])[-1:]
        golden = golden.reshape(-1, golden.shape[-1])[-1:]
        if logits.shape != golden.shape:
            raise Fail(f"{what}: last-row logits {logits.shape} against goldens {golden.shape}")
        rows = "last"
    d = np.abs(logits - golden)
    agree = float(np.mean(np.argmax(logits, axis=1) == np.argmax(golden, axis=1)))
    return {"rows": rows, "n_rows": int(d.shape[0]), "max_abs": float(d.max()), "mean_abs": float(d.mean()), "argmax_agree": agree}


def stem_of(path):
    b = os.path.basename(path.rstrip("/"))
    return b[:-5] if b.endswith(".gguf") else b


def strata_accuracy(a, strata_argv, tmp):
    """Per (model, compute mode): strata's logits of the goldens' prompt against the goldens."""
    out = []
    ids = None
    models = list(a.gguf) + ([a.checkpoint] if a.checkpoint and a.checkpoint_golden_key else [])
    for m in models if strata_argv else []:
        key = a.golden_key.replace("{stem}", stem_of(m)) if m != a.checkpoint else a.checkpoint_golden_key
        golden = read_safetensors(a.goldens, key)
        if ids is None:
            ids = read_safetensors(a.goldens, a.golden_tokens_key).astype(np.int64).reshape(-1)
        for mode in a.strata_compute:
            npy = os.path.join(tmp, f"logits-{len(out)}.npy")
            argv = strata_argv + ["--model", m, "--compute", mode, "--tokens", ",".join(map(str, ids)),
                                  "--save-logits", npy] + (["--all-logits"] if golden.ndim == 2 else [])
            env = dict(os.environ, GOMAXPROCS=str(a.threads))
            rc, so, se, _, _ = run_process(argv, env, timeout=a.timeout)
            if rc != 0:
                raise Fail(f"strata accuracy run failed (rc {rc}): {shlex.join(argv)}\n{se.strip()[-2000:]}")
            r = compare(np.load(npy), golden, f"strata {mode} on {m}")
            r.update(engine="strata", config=mode, model=m, reference=f"{a.goldens}:{key}",
                     logits=f"strata --compute {mode} --tokens <the goldens' {len(ids)} ids> (this run)", command=shlex.join(argv))
            out.append(r)
    for spec in a.peer_logits:
        eng, _, src = spec.partition("=")
        if eng not in ("ik_llama.cpp", "llama.cpp") or not src:
            raise Fail(f"--peer-logits {spec!r}: want ENGINE=FILE.npy or ENGINE=FILE.safetensors:KEY, ENGINE ik_llama.cpp or llama.cpp")
        for m in a.gguf:
            key = a.golden_key.replace("{stem}", stem_of(m))
            golden = read_safetensors(a.goldens, key)
            r = compare(read_array(src, stem_of(m)), golden, f"--peer-logits {spec} on {m}")
            r.update(engine=eng, config="(given logits)", model=m, reference=f"{a.goldens}:{key}",
                     logits=src.replace("{stem}", stem_of(m)))
            out.append(r)
    return out


# ---------------------------------------------------------------------------------------------
# Tables


def ratio_stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def summarize(cfgs, tps, Ts, rounds):
    """Per T: each configuration's median tokens/s and its paired per-round ratios to each peer
    engine's fastest configuration (by median), and each engine's fastest."""
    summary = []
    for T in Ts:
        med = {c.key: statistics.median(tps[(c.key, T)]) for c in cfgs}
        fastest, same = {}, {}  # engine -> its fastest; (engine, model) -> its fastest on that model
        for c in cfgs:
            if c.engine not in fastest or med[c.key] > med[fastest[c.engine].key]:
                fastest[c.engine] = c
            k = (c.engine, c.model)
            if k not in same or med[c.key] > med[same[k].key]:
                same[k] = c
        rows = []
        for c in cfgs:
            v = tps[(c.key, T)]
            row = {"engine": c.engine, "config": c.name, "model": c.model, "key": c.key,
                   "tokens_per_s": ratio_stats(v), "fastest_of_engine": fastest[c.engine] is c, "ratio_to": {}, "ratio_to_same_file": {}}
            for eng in ("ik_llama.cpp", "llama.cpp"):
                for ref_cfg, out in ((fastest.get(eng), row["ratio_to"]), (same.get((eng, c.model)), row["ratio_to_same_file"])):
                    if ref_cfg is not None and ref_cfg is not c:
                        ref = tps[(ref_cfg.key, T)]
                        out[eng] = ratio_stats([v[r] / ref[r] for r in range(rounds)])
            rows.append(row)
        summary.append({"T": T, "fastest": {e: c.key for e, c in fastest.items()}, "rows": rows})
    return summary


def fmt_ratio(s):
    return f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})"


def print_tables(summary, accuracy, rounds, threads):
    acc = {}
    for r in accuracy:
        acc[(r["engine"], r["config"] if r["engine"] == "strata" else None, r["model"])] = r
    for s in summary:
        print(f"\nT = {s['T']}, {threads} threads, {rounds} rounds: tokens/s median (min-max); ratio = this row's "
              f"tokens/s over that of the peer's fastest configuration (on any file, or on the same file) in the same round, "
              f"median (min-max) of the {rounds} paired ratios")
        peers = [e for e in ("ik_llama.cpp", "llama.cpp") if e in s["fastest"]]
        head = ["engine", "config", "model", "tokens/s"] + [f"/ {e} {w}" for e in peers for w in ("fastest", "same file")] + ["accuracy: max |logit - golden| (rows), argmax agreement"]
        lines = [head]
        for r in s["rows"]:
            t = r["tokens_per_s"]
            cells = [r["engine"], r["config"] + (" *" if r["fastest_of_engine"] else ""), os.path.basename(r["model"].rstrip("/")),
                     f"{t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f})"]
            for e in peers:
                cells.append(fmt_ratio(r["ratio_to"][e]) if e in r["ratio_to"] else "1 (itself)")
                if e in r["ratio_to_same_file"]:
                    cells.append(fmt_ratio(r["ratio_to_same_file"][e]))
                else:
                    cells.append("1 (itself)" if r["engine"] == e else "-")
            ar = acc.get((r["engine"], r["config"] if r["engine"] == "strata" else None, r["model"]))
            cells.append(f"{ar['max_abs']:.3g} ({ar['n_rows']} rows), {ar['argmax_agree']:.2f}" if ar else "-")
            lines.append(cells)
        w = [max(len(l[i]) for l in lines) for i in range(len(head))]
        for i, l in enumerate(lines):
            print("  " + "  ".join(c.ljust(w[j]) for j, c in enumerate(l)).rstrip())
            if i == 0:
                print("  " + "  ".join("-" * x for x in w))
        print("  * the engine's fastest configuration at this T (by median)")
    if accuracy:
        print("\naccuracy sources:")
        for r in accuracy:
            print(f"  {r['engine']} {r['config']} {os.path.basename(r['model'].rstrip('/'))}: logits of {r['logits']} against {r['reference']}, "
                  f"{r['n_rows']} rows: max {r['max_abs']:.3g}, mean {r['mean_abs']:.3g}, argmax {r['argmax_agree']:.2f}")


def write_json(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".peers-", suffix=".json")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ---------------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See bench/peers/README.md.")
    p.add_argument("--gguf", action="append", required=True, metavar="FILE", help="GGUF file (repeat for several)")
    p.add_argument("--checkpoint", metavar="DIR", help="the MLX or Hugging Face form of the same weights (strata only)")
    p.add_argument("--ik", metavar="BUILD", help="ik_llama.cpp build folder (its bin/llama-bench) or llama-bench binary")
    p.add_argument("--llama", metavar="BUILD", help="llama.cpp build folder (its bin/llama-bench) or llama-bench binary")
    p.add_argument("--strata", metavar="CMD", default=None, help="strata CLI command (default: go run ./cmd/strata, or go run ./examples/prefill where cmd/strata does not exist); go run PKG is built once")
    p.add_argument("--no-strata", action="store_true", help="run the peers only")
    p.add_argument("-T", "--tokens", default="512", help="comma-separated prompt lengths T (default 512)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads of every engine (default: logical CPUs)")
    p.add_argument("--rounds", type=int, default=3, help="rounds; each runs every configuration once at each T (default 3)")
    p.add_argument("--ik-rtr", default="0,1", help="ik_llama.cpp -rtr values to try (default 0,1)")
    p.add_argument("--ik-args", default="", help="extra ik_llama.cpp llama-bench arguments (one shell-quoted string)")
    p.add_argument("--llama-args", default="", help="extra llama.cpp llama-bench arguments (one shell-quoted string)")
    p.add_argument("--strata-compute", default="f32,int8,bf16", help="strata compute modes to try (default f32,int8,bf16)")
    p.add_argument("--strata-warmup", type=int, default=64, help="tokens of strata's untimed first --bench run in each process (0: none; default 64)")
    p.add_argument("--strata-op-tokens", type=int, default=16, help="--bench-op-tokens of strata's runs: its op cases run before the model, kept small (default 16)")
    p.add_argument("--strata-args", default="", help="extra strata CLI arguments (one shell-quoted string)")
    p.add_argument("--goldens", metavar="FILE.safetensors", help="reference logits for the accuracy column (strata's measured here)")
    p.add_argument("--golden-key", default="{stem}.logits", help="tensor of --goldens per GGUF file ({stem}: its name without .gguf; default {stem}.logits), [T, vocab] or [vocab]")
    p.add_argument("--golden-tokens-key", default="input_ids", help="tensor of --goldens holding the prompt's token ids (default input_ids)")
    p.add_argument("--checkpoint-golden-key", default=None, help="tensor of --goldens for --checkpoint (default: no accuracy for it)")
    p.add_argument("--peer-logits", action="append", default=[], metavar="ENGINE=SRC", help="a peer's logits of the goldens' prompt: ENGINE=FILE.npy or ENGINE=FILE.safetensors:KEY ({stem} in KEY as above)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds one run may take (default 1800)")
    p.add_argument("--json", metavar="FILE", help="write every run and the tables as JSON to FILE")
    p.add_argument("--dry-run", action="store_true", help="print the command lines of one round and exit")
    a = p.parse_args(argv)
    a.tokens = parse_int_list("--tokens", a.tokens)
    a.ik_rtr = parse_int_list("--ik-rtr", a.ik_rtr, lo=0)
    if any(r > 1 for r in a.ik_rtr):
        raise Fail(f"--ik-rtr: want 0 and/or 1")
    a.strata_compute = [m.strip() for m in a.strata_compute.split(",")]
    for m in a.strata_compute:
        if m not in STRATA_COMPUTE:
            raise Fail(f"--strata-compute: {m!r} is not one of {', '.join(STRATA_COMPUTE)}")
    for name in ("threads", "rounds"):
        if getattr(a, name) < 1:
            raise Fail(f"--{name} {getattr(a, name)}: want at least 1")
    if a.strata_warmup < 0 or a.strata_op_tokens < 1:
        raise Fail("--strata-warmup: want >= 0; --strata-op-tokens: want >= 1")
    if a.strata_warmup and a.strata_warmup in a.tokens:
        raise Fail(f"--strata-warmup {a.strata_warmup} equals a T: give another warm-up length")
    for g in a.gguf:
        if not os.path.isfile(g):
            raise Fail(f"--gguf {g}: no such file")
        with open(g, "rb") as f:
            if f.read(4) != b"GGUF":
                raise Fail(f"--gguf {g}: not a GGUF file (no GGUF magic)")
    if len(set(map(stem_of, a.gguf))) != len(a.gguf):
        raise Fail("--gguf: two files with the same name")
    if a.checkpoint and not os.path.isfile(os.path.join(a.checkpoint, "config.json")):
        raise Fail(f"--checkpoint {a.checkpoint}: no config.json in it")
    a.ik = find_bench("--ik", a.ik)
    a.llama = find_bench("--llama", a.llama)
    if a.no_strata and a.strata:
        raise Fail("give --strata or --no-strata, not both")
    if a.peer_logits and not a.goldens:
        raise Fail("--peer-logits needs --goldens")
    if a.goldens and not os.path.isfile(a.goldens):
        raise Fail(f"--goldens {a.goldens}: no such file")
    if a.checkpoint_golden_key and not (a.goldens and a.checkpoint):
        raise Fail("--checkpoint-golden-key needs --goldens and --checkpoint")
    if a.json and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        raise Fail(f"--json {a.json}: its folder does not exist")
    if not (a.ik or a.llama or not a.no_strata):
        raise Fail("nothing to run: give --ik, --llama, or leave strata in")
    return a


def main(argv):
    a = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        strata_argv, strata_how = None, None
        if not a.no_strata:
            cmd = a.strata or default_strata_command()
            if a.dry_run:
                strata_argv, strata_how = shlex.split(cmd), cmd
            else:
                strata_argv, strata_how = build_strata(cmd, tmp)
        cfgs = make_configs(a, strata_argv)
        if a.dry_run:
            for T in a.tokens:
                for c in cfgs:
                    env = "GOMAXPROCS=%d " % a.threads if c.engine == "strata" else ""
                    print(env + shlex.join(c.argv_for_T(T)))
            return 0
        total = sum(os.path.getsize(f) for c in cfgs for f in c.files)
        avail = mem_available()
        if avail is not None and total > avail:
            print(f"warning: the model files ({total >> 20} MiB) exceed the available memory ({avail >> 20} MiB): they cannot all stay in the page cache", file=sys.stderr)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        machine = cpu_info()
        print(f"machine: {machine.get('model_name')} (family {machine.get('cpu_family')}, model {machine.get('model')}), "
              f"{machine.get('logical_cpus')} logical CPUs; {' '.join(machine.get('simd', []))}")
        print(f"strata: {strata_how or '(not run)'}; ik_llama.cpp: {a.ik or '(not run)'}; llama.cpp: {a.llama or '(not run)'}")
        runs, tps, info = [], {}, {}
        for rnd in range(a.rounds):
            for T in a.tokens:
                order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
                for c in order:
                    preread(c.files)
                    argv = c.argv_for_T(T)
                    load = os.getloadavg()[0]
                    stop = strata_done(T) if c.engine == "strata" else None
                    rc, out, err, rss, sec = run_process(argv, env_for(c, a.threads), stop=stop, timeout=a.timeout)
                    if rc != 0:
                        raise Fail(f"{c.key} T={T} failed (rc {rc}): {shlex.join(argv)}\n{err.strip()[-3000:]}")
                    v, inf = c.parse(T)(out)
                    info.setdefault(c.key, inf)
                    tps.setdefault((c.key, T), []).append(v)
                    runs.append({"round": rnd, "T": T, "engine": c.engine, "config": c.name, "model": c.model,
                                 "tokens_per_s": v, "peak_rss_bytes": rss, "wall_s": round(sec, 3),
                                 "load1_before": load, "command": shlex.join(argv)})
                    print(f"  round {rnd} T={T} {c.key}: {v:.1f} tokens/s, peak RSS {rss / 2**30:.2f} GiB, load {load:.2f}", flush=True)
        summary = summarize(cfgs, tps, a.tokens, a.rounds)
        accuracy = strata_accuracy(a, strata_argv, tmp) if a.goldens else []
        print_tables(summary, accuracy, a.rounds, a.threads)
        loads = [r["load1_before"] for r in runs]
        print(f"\n1-minute load average before each run: {min(loads):.2f}-{max(loads):.2f}")
        if a.json:
            write_json(a.json, {"started_utc": started, "machine": machine, "threads": a.threads, "rounds": a.rounds,
                                "T": a.tokens, "strata": strata_how, "ik_llama.cpp": a.ik, "llama.cpp": a.llama,
                                "engine_info": info, "runs": runs, "summary": summary, "accuracy": accuracy})
            print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Fail as e:
        print(f"peers: {e}", file=sys.stderr)
        sys.exit(1)
