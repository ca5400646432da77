#!/usr/bin/env python3
"""Pipeline prefill over MPI: one rank per stage, each loading only its decoder layers.

    STRATA_LIBRARY=./libstrata.so PYTHONPATH=python mpirun -np N python3 examples/python/pipeline_mpi.py \\
        --model DIR --tokens-file F [--chunk C] [--stages 0:2,2:4] [--all-logits] --save-logits OUT.npy

Rank k loads layers [lo_k, hi_k) (strata.Model(layers=...)): rank 0 holds the embedding, the last
rank the head. The prompt runs in chunks of C tokens (default: the whole prompt as one chunk);
every stage's session continues across chunks. A stage sends each chunk's residual streams,
float32 [tokens, hidden_size] in one contiguous buffer, to the next rank with a non-blocking send
and starts on the next chunk while it travels, so stage k works on chunk c while stage k+1 works
on chunk c-1. The last rank sends its logits to rank 0, which writes them (--save-logits: float32
[T, vocab] with --all-logits, else [vocab], as `go run ./cmd/strata` writes them) and prints
each stage's compute time and the time it waited. The file is written whole at the end through a
temporary file beside it (strata.write_file), as the CLI writes it: a run that fails or is killed
leaves what the path held.

The logits are bitwise those of one process that makes the same prefill calls, with the same
--all-logits (strata's stages chained through their residual streams give the whole model's
logits bitwise, and each stage makes the same calls): with no --chunk, one call of the whole
prompt; with --chunk C, calls of C tokens (`examples/python/prefill.py --chunk C`), whose logits
are within 1e-4 of one call's.

Before any prefill the ranks compare what they are about to run: a fingerprint of the checkpoint
(config.json, the shard index, every shard's size and safetensors header, and 16 samples of
4 KiB of each shard's data), libstrata's version, and the options. A disagreement, a stage map
with a gap or an overlap, or a rank that cannot read its checkpoint or prompt is reported on
every rank, naming the rank, and the job exits with status 1. A failure during the pipeline (a
prefill error, a hidden-state buffer of the wrong size) is reported by the rank that saw it and
ends the job through MPI_Abort, so no rank is left waiting.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import struct
import sys
import time
from collections import deque
from typing import List, Optional, Sequence, Tuple

import numpy as np

try:
    from mpi4py import MPI
except ImportError:
    sys.exit("pipeline_mpi.py needs mpi4py (Debian: apt-get install python3-mpi4py openmpi-bin)")

import strata
from prefill import _count  # this folder is on sys.path when the script runs

SAMPLES, SAMPLE_BYTES = 16, 4096  # fingerprint: samples of each shard's data
MAX_COUNT = 2**31 - 1  # MPI counts are C ints: the most floats one message holds
SEND_WINDOW = 2  # non-blocking sends in flight per rank (bounds the buffers kept alive)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the stack unwinds (a file being written is
    removed) before the rank exits with status 128 + the signal."""


class JobError(Exception):
    """A failure every rank knows of (found by a collective check): each rank reports it and the
    job exits with status 1."""


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory (each rank reads its own)")
    ap.add_argument("--tokens-file", required=True, help="token ids separated by commas or white space (read by rank 0)")
    ap.add_argument("--chunk", type=int, default=0, help="tokens per chunk (0: the whole prompt in one chunk)")
    ap.add_argument("--stages", default="", help="layer ranges lo:hi per rank, e.g. 0:2,2:4 (default: split evenly)")
    ap.add_argument("--all-logits", action="store_true", help="logits for every token, not only the last")
    ap.add_argument("--save-logits", help="rank 0 writes the logits to this .npy file")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "metal", "emu"])
    ap.add_argument("--max-context", type=int, default=0, help="session capacity (default: prompt length, at least 4096)")
    args = ap.parse_args(argv)
    if args.chunk < 0 or args.max_context < 0:
        ap.error("--chunk and --max-context must be >= 0")
    return args


def read_config(model_dir: str) -> Tuple[int, int]:
    """(num_hidden_layers, vocab_size) from model_dir/config.json (top level or text_config)."""
    path = os.path.join(model_dir, "config.json")
    with open(path, "rb") as f:
        try:
            cfg = json.loads(f.read())
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    text = cfg.get("text_config") or {}
    layers = cfg.get("num_hidden_layers") or text.get("num_hidden_layers")
    vocab = cfg.get("vocab_size") or text.get("vocab_size")
    if not isinstance(layers, int) or not isinstance(vocab, int) or layers < 1 or vocab < 1:
        raise ValueError(f"{path}: no positive num_hidden_layers and vocab_size")
    return layers, vocab


def fingerprint(model_dir: str) -> str:
    """A hash of what identifies a checkpoint without reading its weights: config.json and
    model.safetensors.index.json byte for byte, and for every *.safetensors file its name, size
    and header (every tensor's name, dtype, shape and offsets) and SAMPLES evenly spaced samples
    of SAMPLE_BYTES of its data. Two copies of one checkpoint agree wherever they are stored;
    checkpoints that differ in structure or config always differ here, ones that differ only in
    weight bytes outside the samples do not."""
    h = hashlib.sha256()

    def put(tag: str, data: bytes) -> None:
        h.update(tag.encode() + b"\0" + struct.pack("<Q", len(data)) + data)

    for name in ("config.json", "model.safetensors.index.json"):
        path = os.path.join(model_dir, name)
        if name == "config.json" or os.path.exists(path):
            with open(path, "rb") as f:
                put(name, f.read())
    shards = sorted(n for n in os.listdir(model_dir) if n.endswith(".safetensors"))
    if not shards:
        raise ValueError(f"{model_dir}: no .safetensors files")
    for name in shards:
        path = os.path.join(model_dir, name)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            (n,) = struct.unpack("<Q", f.read(8)) if size >= 8 else (-1,)
            if not 0 <= n <= size - 8:
                raise ValueError(f"{path}: not a safetensors file (header length {n}, file size {size})")
            put(name, struct.pack("<Q", size) + f.read(n))
            start, span = 8 + n, size - 8 - n
            for i in range(SAMPLES):
                f.seek(start + span * i // SAMPLES)
                put(f"{name}@{i}", f.read(SAMPLE_BYTES))
    return h.hexdigest()[:16]


def even_stages(layers: int, ranks: int) -> List[Tuple[int, int]]:
    """layers split into ranks consecutive ranges, the first layers % ranks one layer longer."""
    if ranks > layers:
        raise ValueError(f"{ranks} ranks for a model of {layers} layers: a stage needs at least one layer")
    out, lo = [], 0
    for k in range(ranks):
        hi = lo + layers // ranks + (1 if k < layers % ranks else 0)
        out.append((lo, hi))
        lo = hi
    return out


def _layers(lo: int, hi: int, n: int) -> str:
    """Layers [lo, hi) of n in words, as strata's messages write a range (lo:hi of n), with their verb."""
    return f"layer {lo} of {n} is" if hi - lo == 1 else f"layers {lo}:{hi} of {n} are"



def parse_stages(text: str, layers: int, ranks: int) -> List[Tuple[int, int]]:
    """--stages "lo:hi,lo:hi,...": one range per rank, in rank order, that together cover layers
    [0, layers) once. Raises ValueError naming the gap, overlap or bad entry."""
    stages = []
    for i, part in enumerate(text.split(",")):
        try:
            lo, hi = (int(x) for x in part.split(":"))
        except ValueError:
            raise ValueError(f"--stages entry {i} {part!r} is not lo:hi") from None
        if not 0 <= lo < hi:
            raise ValueError(f"--stages entry {i} {part!r} is not a non-empty range of layers")
        stages.append((lo, hi))
    if len(stages) != ranks:
        raise ValueError(f"--stages {text!r} gives {len(stages)} stage(s) for {ranks} ranks (one per rank)")
    edge = 0
    for k, (lo, hi) in enumerate(stages):
        if lo > edge:
            raise ValueError(f"--stages {text!r} leaves a gap: {_layers(edge, lo, layers)} in no stage "
                             f"(stage {k} starts at {lo})")
        if lo < edge:
            raise ValueError(f"--stages {text!r} overlaps: {_layers(lo, edge, layers)} in stage {k - 1} and in stage {k}")
        edge = hi
    if edge != layers:
        what = f"{_layers(edge, layers, layers)} in no stage" if edge < layers else f"the model has {layers} layers"
        raise ValueError(f"--stages {text!r} ends at layer {edge}: {what}")
    return stages


def read_tokens(path: str, vocab: int) -> np.ndarray:
    with open(path) as f:
        text = f.read()
    try:
        ids = np.asarray([int(x) for x in text.replace(",", " ").split()], dtype=np.int64)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    if ids.size == 0:
        raise ValueError(f"{path}: no token ids")
    bad = np.flatnonzero((ids < 0) | (ids >= vocab))
    if bad.size:
        raise ValueError(f"{path}: token {bad[0]} is {ids[bad[0]]}, outside [0, {vocab})")
    return ids.astype(np.int32)


def agree(comm: "MPI.Comm", err: Optional[str], what: str, value: object = None) -> list:
    """Allgathers (err, value) of every rank; raises JobError on every rank when any rank has an
    error, naming each failing rank. Returns the values in rank order."""
    got = comm.allgather((err, value))
    failed = [f"rank {r}: {e}" for r, (e, _) in enumerate(got) if e is not None]
    if failed:
        raise JobError(f"{what} failed on {len(failed)} of {len(got)} ranks: " + "; ".join(failed))
    return [v for _, v in got]


class ProbedRecv:
    """A receive into buf (float32) from source on comm that matches the message with a probe
    first and checks its length: a longer one is drained into a scratch buffer and recorded as
    too long instead of reaching buf (a truncated receive can write past its buffer in some MPI
    transports). poll() advances it without blocking; the receives of one comm and source must
    be polled in the order they were made, as MPI matches them."""

    def __init__(self, comm: "MPI.Comm", buf: np.ndarray, source: int) -> None:
        self.comm, self.buf, self.source = comm, buf, source
        self.req: Optional["MPI.Request"] = None
        self.count: Optional[int] = None  # floats received, once complete
        self.longer = False  # the message was longer than buf (count is its length)

    def poll(self) -> bool:
        """Advances the receive; True once it is complete."""
        if self.count is not None:
            return True
        if self.req is None:
            st = MPI.Status()
            msg = self.comm.Improbe(source=self.source, status=st)
            if msg is None:
                return False
            n = st.Get_count(MPI.FLOAT)
            if n > self.buf.size:
                msg.Recv([np.empty(n, np.float32), MPI.FLOAT])
                self.count, self.longer = n, True
                return True
            self.req = msg.Irecv([self.buf, MPI.FLOAT])
        st = MPI.Status()
        if not self.req.Test(st):
            return False
        self.count = st.Get_count(MPI.FLOAT)
        return True

    def got(self) -> str:
        """How many floats arrived, as text: "more than N" for a message longer than buf."""
        return f"more than {self.buf.size}" if self.longer else str(self.count)


class Stage:
    """One rank's part of the pipeline: its model, its neighbours, its clocks (seconds).

    The schedule cannot deadlock, whatever MPI buffers: a rank that waits for anything (room in
    its send window, a hidden state, the end of its sends) keeps polling every receive it will
    need next, the next chunk's hidden state from the previous rank and, on rank 0, the last
    stage's logits in order (posted for every chunk before the first prefill), so every send
    finds its receive progressed while its receiver is not computing. By induction from the last
    stage, whose only sends are the logits that rank 0 always takes, every stage's sends
    complete."""

    def __init__(self, comm: "MPI.Comm", model: "strata.Model") -> None:
        self.rank, self.ranks = comm.Get_rank(), comm.Get_size()
        self.model = model
        self.hidden = comm.Dup()  # stage k -> k+1: residual streams
        self.logits = comm.Dup()  # last stage -> rank 0: logits
        self.sends: deque = deque()  # (request, buffer kept alive until the request completes)
        self.logit_recvs: deque = deque()  # rank 0: the logits receives not yet complete, in order
        self.next_hidden: Optional[ProbedRecv] = None  # the next chunk's hidden state
        self.compute = self.wait_fill = self.wait_in = self.wait_out = self.wait_logits = 0.0

    def free(self) -> None:
        self.hidden.Free()
        self.logits.Free()

    def progress(self) -> None:
        """Completes the sends that have arrived and advances every receive this rank needs next."""
        while self.sends and self.sends[0][0].Test():
            self.sends.popleft()
        while self.logit_recvs and self.logit_recvs[0].poll():
            self.logit_recvs.popleft()
        if self.next_hidden is not None:
            self.next_hidden.poll()

    def wait_for(self, done) -> float:
        """Polls (progress) until done() holds, with short sleeps, so a waiting rank leaves the
        CPU to the computing ranks (MPI's blocking waits spin, which costs a core on an
        oversubscribed host). Returns the seconds waited."""
        t, delay = MPI.Wtime(), 2e-5
        while True:
            self.progress()
            if done():
                return MPI.Wtime() - t
            time.sleep(delay)
            delay = min(2 * delay, 1e-3)

    def send(self, comm: "MPI.Comm", buf: np.ndarray, dest: int) -> None:
        """Starts a non-blocking send of buf, first waiting (and polling this rank's receives)
        while SEND_WINDOW sends are in flight (the next rank is behind)."""
        self.wait_out += self.wait_for(lambda: len(self.sends) < SEND_WINDOW)
        self.sends.append((comm.Isend(buf, dest=dest), buf))

    def post_recv(self, rows: int) -> Tuple[np.ndarray, ProbedRecv]:
        buf = np.empty((rows, self.model.hidden_size), np.float32)
        return buf, ProbedRecv(self.hidden, buf, self.rank - 1)

    def run(self, tokens: np.ndarray, chunk: int, all_logits: bool, max_context: int) -> Optional[np.ndarray]:
        """Runs every chunk through this stage; returns the logits on rank 0, None elsewhere."""
        T, HS, V = tokens.size, self.model.hidden_size, self.model.vocab
        bounds = [(a, min(a + chunk, T)) for a in range(0, T, chunk)]
        first, last = self.rank == 0, self.rank == self.ranks - 1
        out, pending = None, []
        if first:
            out = np.empty((T, V) if all_logits else (V,), np.float32)
            if not last:  # receive the last stage's logits straight into out
                parts = ([(f"chunk {c}", out[a:b]) for c, (a, b) in enumerate(bounds)] if all_logits
                         else [("the last token", out)])
                pending = [(what, ProbedRecv(self.logits, p, self.ranks - 1)) for what, p in parts]
                self.logit_recvs.extend(r for _, r in pending)
        nxt = None if first else self.post_recv(bounds[0][1] - bounds[0][0])
        with self.model.session(max_context or max(T, 4096)) as s:
            for c, (a, b) in enumerate(bounds):
                hidden = None
                if nxt is not None:
                    buf, req = nxt
                    self.next_hidden = req
                    want = (b - a) * HS
                    waited = self.wait_for(req.poll)
                    if c == 0:
                        self.wait_fill += waited
                    else:
                        self.wait_in += waited
                    if req.got() != str(want):
                        raise ValueError(f"the hidden state of chunk {c} (tokens {a}..{b - 1}) from rank {self.rank - 1} "
                                         f"has {req.got()} floats, want {want} ({b - a} tokens x hidden_size {HS})")
                    hidden = buf
                    nxt = self.post_recv(bounds[c + 1][1] - bounds[c + 1][0]) if c + 1 < len(bounds) else None
                    self.next_hidden = nxt[1] if nxt is not None else None
                t = MPI.Wtime()
                y = s.prefill(tokens[a:b], all_logits=all_logits, hidden=hidden)
                self.compute += MPI.Wtime() - t
                if not last:
                    self.send(self.hidden, y, self.rank + 1)
                elif first:  # one rank: the whole model
                    if all_logits:
                        out[a:b] = y
                    elif c == len(bounds) - 1:
                        out[:] = y
                elif all_logits or c == len(bounds) - 1:
                    self.send(self.logits, y, 0)
                self.progress()
        self.wait_out += self.wait_for(lambda: not self.sends)
        self.wait_logits = self.wait_for(lambda: not self.logit_recvs)
        for what, req in pending:
            if req.got() != str(req.buf.size):
                raise ValueError(f"the logits of {what} from rank {self.ranks - 1} have {req.got()} floats, want {req.buf.size}")
        return out


def run(comm: "MPI.Comm", args: argparse.Namespace) -> None:
    rank, ranks = comm.Get_rank(), comm.Get_size()
    # 1. What every rank can check before loading anything.
    err, mine, tokens = None, None, None
    try:
        layers, vocab = read_config(args.model)
        mine = {"model": f"{fingerprint(args.model)} ({args.model})", "layers": layers, "vocab": vocab,
                "libstrata version": strata.version(),
                "options": f"--stages {args.stages!r} --chunk {args.chunk} --all-logits {args.all_logits} "
                           f"--backend {args.backend} --max-context {args.max_context}"}
        if rank == 0:
            if args.save_logits:  # checked first: a bad path fails before the prefill
                strata.check_output(args.save_logits, "--save-logits")
                if strata.same_file(args.save_logits, args.tokens_file):
                    raise ValueError(f"--save-logits {args.save_logits} is the file --tokens-file reads: "
                                     "the run would replace its own input")
            tokens = read_tokens(args.tokens_file, vocab)
    except (OSError, ValueError, strata.Error) as e:
        err = str(e)  # each names its file
    views = agree(comm, err, "reading the checkpoint and the prompt", mine)
    for what in ("model", "libstrata version", "options"):
        # The model is compared by fingerprint: the same checkpoint may lie in different folders.
        key = (lambda v: v[what].split(" ")[0]) if what == "model" else (lambda v: v[what])
        if any(key(v) != key(views[0]) for v in views):
            name = "model (checkpoint fingerprint)" if what == "model" else what
            raise JobError(f"the ranks disagree on the {name}: " + "; ".join(f"rank {r}: {v[what]}" for r, v in enumerate(views)))
    layers, vocab = views[0]["layers"], views[0]["vocab"]
    try:
        stages = parse_stages(args.stages, layers, ranks) if args.stages else even_stages(layers, ranks)
    except ValueError as e:
        raise JobError(str(e)) from None
    tokens = comm.bcast(tokens, root=0)
    chunk = args.chunk or tokens.size
    # 2. Each rank loads its stage.
    lo, hi = stages[rank]
    err, model, info = None, None, None
    try:
        dev = strata.Device(args.backend)
        t = time.perf_counter()
        model = strata.Model(dev, args.model, layers=(lo, hi))
        info = (model.describe(), time.perf_counter() - t, model.hidden_size)
    except strata.Error as e:
        err = f"loading layers {lo}:{hi} of {layers} of {args.model}: {e}"
    infos = agree(comm, err, "loading the stages", info)
    rows = min(chunk, tokens.size)
    if max(rows * infos[0][2], rows * vocab if args.all_logits else vocab) > MAX_COUNT:
        raise JobError(f"a chunk of {rows} tokens is more than one MPI message holds ({MAX_COUNT} floats): lower --chunk")
    if rank == 0:
        print(f"library   {strata.version()}")
        print(f"backend   {dev.info()['backend']}")
        print(f"kernels   {dev.info()['kernels']}")
        print(f"prompt    {_count(tokens.size, 'token')} in chunks of {chunk} ({_count(-(-tokens.size // chunk), 'chunk')})")
        for r, (desc, load_s, _) in enumerate(infos):
            print(f"stage {r}   on rank {r}, loaded in {1e3 * load_s:.0f} ms: {desc}")
    # 3. The pipeline: every rank starts together; a failure now ends the job through Abort.
    stage = Stage(comm, model)
    comm.Barrier()
    t0 = MPI.Wtime()
    logits = stage.run(tokens, chunk, args.all_logits, args.max_context)
    wall = MPI.Wtime() - t0
    stage.free()
    clocks = comm.gather((stage.compute, stage.wait_fill, stage.wait_in, stage.wait_out, wall), root=0)
    if rank != 0:
        return
    print(f"prefill   {_count(tokens.size, 'token')} in {1e3 * wall:.1f} ms: {tokens.size / wall:.1f} tokens/s "
          f"(rank 0, from the start to the last logits received)")
    print("stage  layers     compute ms  wait fill ms  wait in ms  wait out ms  busy")
    for r, (comp, fill, win, wout, w) in enumerate(clocks):
        print(f"{r:5d}  {f'{stages[r][0]}:{stages[r][1]}':9s}  {1e3 * comp:10.1f}  {1e3 * fill:12.1f}  "
              f"{1e3 * win:10.1f}  {1e3 * wout:11.1f}  {comp / w:4.0%}")
    print(f"overlap   the stages computed {1e3 * sum(c[0] for c in clocks):.1f} ms in all, in {1e3 * wall:.1f} ms; "
          f"rank 0 waited {1e3 * stage.wait_logits:.1f} ms for the last stage's logits")
    last = logits[-1] if args.all_logits else logits
    top = np.argsort(-last, kind="stable")[:5]
    print(f"top-5     next token after position {tokens.size - 1}: " + "  ".join(f"{i} ({last[i]:.4f})" for i in top))
    if args.save_logits:  # written whole at the end: a failed or killed run leaves the file as it was
        strata.write_file(args.save_logits, lambda f: np.save(f, logits))
        print(f"saved     {args.save_logits}")


def report(line: str) -> None:
    """Writes line to stderr in one write, so that the lines of ranks sharing a terminal do not
    interleave."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    # SIGTERM (mpirun's, when another rank fails) unwinds like SIGINT, so the file being written
    # is removed (strata.write_file).
    def terminated(sig: int, frame: object) -> None:
        raise Terminated(sig)

    signal.signal(signal.SIGTERM, terminated)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        run(comm, args)
    except JobError as e:
        report(f"pipeline_mpi: rank {rank}: {e}")
        comm.Barrier()  # every rank has raised it: let each one print before any exits
        sys.exit(1)
    except Terminated as e:  # the job is being ended (mpirun ends the others): exit with the signal's status
        report(f"pipeline_mpi: rank {rank}: terminated by signal {e.args[0]}")
        sys.exit(128 + e.args[0])
    except BaseException as e:  # this rank alone: the others may be waiting on it
        msg = f"{type(e).__name__}: {e}" if not isinstance(e, strata.Error) else str(e)
        report(f"pipeline_mpi: rank {rank} of {comm.Get_size()} failed: {msg}")
        comm.Abort(1)


if __name__ == "__main__":
    main()
