#!/usr/bin/env python3
"""Prefill a prompt through a checkpoint with strata from Python: the counterpart of
`go run ./cmd/strata` (same flags for the same things).

    STRATA_LIBRARY=./libstrata.so PYTHONPATH=python \\
        python3 examples/python/prefill.py --model DIR --tokens 1,2,3 [--chunk N] [--all-logits] [--save-logits out.npy]
"""

import argparse
import signal
import sys
import time

import numpy as np

import strata

MAX_CONTEXT = 1 << 24  # a session's largest context (the library refuses a larger max_context)


def _count(n: int, word: str) -> str:
    """n word, or n words: "1 token", "2 tokens"."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"

def parse_tokens(args, vocab):
    given = [x for x in (args.tokens, args.tokens_file, args.random_tokens) if x]
    if len(given) != 1:
        sys.exit("give exactly one of --tokens, --tokens-file, --random-tokens")
    if args.random_tokens:
        rng = np.random.default_rng(args.seed)
        return rng.integers(0, vocab, size=args.random_tokens, dtype=np.int32)
    text = args.tokens
    if args.tokens_file:
        try:
            with open(args.tokens_file, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            sys.exit(f"--tokens-file {args.tokens_file}: {e.strerror or e}")
        except UnicodeDecodeError as e:
            sys.exit(f"--tokens-file {args.tokens_file}: not text (byte 0x{e.object[e.start]:02x} at offset {e.start} is not UTF-8)")
    what = f"--tokens-file {args.tokens_file}" if args.tokens_file else "--tokens"
    try:
        ids = parse_ids(text)
    except ValueError as e:
        sys.exit(f"{what}: {e}")
    bad = [i for i, t in enumerate(ids) if not 0 <= t < vocab]
    if bad:
        sys.exit(f"{what}: token id {ids[bad[0]]} (prompt index {bad[0]}) is outside the model's vocabulary [0, {vocab})")
    return np.asarray(ids, dtype=np.int32)


def parse_ids(text):
    """Token ids separated by commas and/or white space, as the CLI reads them: an empty entry
    between two commas, or an entry that is not an integer, raises ValueError naming it."""
    ids = []
    for i, part in enumerate(text.split(",")):
        fields = part.split()
        if not fields and (i > 0 or "," in text):
            raise ValueError(f"empty entry in the token list (after {_count(len(ids), 'id')})")
        for f in fields:
            try:
                ids.append(int(f))
            except ValueError:
                raise ValueError(f"token {f!r} (prompt index {len(ids)}) is not an integer") from None
    if not ids:
        raise ValueError("no token ids given")
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "), allow_abbrev=False)
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--tokens-file", help="file of token ids separated by commas or white space")
    ap.add_argument("--random-tokens", type=int, default=0, help="prefill N random token ids (seeded by --seed)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=0, help="prefill in chunks of N tokens (0: one shot)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "metal", "emu"])
    ap.add_argument("--all-logits", action="store_true", help="compute logits for every token, not only the last")
    ap.add_argument("--save-logits", help="write logits as float32 .npy ([T, vocab] with --all-logits, else [vocab])")
    ap.add_argument("--max-context", type=int, default=0, help="session capacity (default: prompt length, at least 4096)")
    ap.add_argument("-v", action="store_true", help="log library messages to stderr")
    args = ap.parse_args()
    for name in ("chunk", "random_tokens", "max_context"):
        if (getattr(args, name) or 0) < 0:
            ap.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.random_tokens > MAX_CONTEXT:
        ap.error(f"--random-tokens {args.random_tokens}: at most {MAX_CONTEXT} tokens (a session's largest context)")
    if args.save_logits:  # checked first: a bad path should fail before a long prefill
        try:
            strata.check_output(args.save_logits, "--save-logits")
        except ValueError as e:
            ap.error(str(e))
        if args.tokens_file and strata.same_file(args.save_logits, args.tokens_file):
            ap.error(f"--save-logits {args.save_logits} is the file --tokens-file reads: the run would replace its own input")
    # SIGTERM unwinds like SIGINT, so a file being written is removed (strata.write_file).
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))

    if args.v:
        strata.set_log_callback(lambda lvl, msg: print(f"[{lvl}] {msg}", file=sys.stderr), level=0)
    try:
        dev = strata.Device(args.backend)
        t0 = time.perf_counter()
        model = strata.Model(dev, args.model)
        load_s = time.perf_counter() - t0
        tokens = parse_tokens(args, model.vocab)
        capacity = args.max_context or max(len(tokens), 4096)
        info = dev.info()
        print(f"library   {strata.version()}")
        print(f"backend   {info['backend']}")
        print(f"kernels   {info['kernels']}")
        print(f"model     {model.describe()}")
        print(f"          {args.model} (loaded in {1e3 * load_s:.0f} ms)")
        print(f"prompt    {_count(len(tokens), 'token')}" + (f" in chunks of {args.chunk}" if args.chunk else ""))
        step = args.chunk or len(tokens)
        rows = []
        with model.session(capacity) as s:
            t0 = time.perf_counter()
            for at in range(0, len(tokens), step):
                rows.append(s.prefill(tokens[at:at + step], all_logits=args.all_logits))
            dt = time.perf_counter() - t0
            print(f"prefill   {_count(len(tokens), 'token')} in {1e3 * dt:.1f} ms: {len(tokens) / dt:.1f} tokens/s")
            logits = np.concatenate(rows) if args.all_logits else rows[-1]
            last = logits[-1] if args.all_logits else logits
            top = np.argsort(-last, kind="stable")[:5]
            print(f"top-5     next token after position {s.position - 1}: " +
                  "  ".join(f"{i} ({last[i]:.4f})" for i in top))
        if args.save_logits:  # written whole at the end: a failed or killed run leaves the file as it was
            try:
                strata.write_file(args.save_logits, lambda f: np.save(f, logits))
            except OSError as e:
                sys.exit(f"prefill: --save-logits {args.save_logits}: {e.strerror or e}")
            print(f"saved     {args.save_logits}")
    except strata.Error as e:
        sys.exit(f"prefill: {e}")


if __name__ == "__main__":
    main()
