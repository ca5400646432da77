#!/usr/bin/env python3
"""Greedy generation with strata as the prompt engine: prefill the prompt once, then extend the
session one token at a time (each step is a one-token prefill at the next position) and pick the
argmax. Sampling, stopping rules and detokenisation are the host's; this loop shows the shape of
a real host: one session per sequence, snapshots to branch.

    STRATA_LIBRARY=./libstrata.so PYTHONPATH=python \\
        python3 examples/python/generate.py --model DIR --tokens 1,2,3 --new-tokens 16
"""

import argparse
import sys
import time

import numpy as np

import strata


def _count(n: int, word: str) -> str:
    """n word, or n words: "1 token", "2 tokens"."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def parse_ids(text):
    """Token ids separated by commas and/or white space, as prefill.py reads them, kept as Python
    ints: strata.Session.prefill checks that int32 holds them and that the model has them (a
    conversion to int32 here would wrap 4294967297 to 1). An empty entry between two commas, or
    one that is not an integer, raises ValueError naming it."""
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    ap.add_argument("--tokens", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--new-tokens", type=int, default=16, help="tokens to generate")
    ap.add_argument("--eos", type=int, default=-1, help="stop after this token id (default: none)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "metal", "emu"])
    args = ap.parse_args()
    if args.new_tokens < 1:
        ap.error("--new-tokens must be >= 1")

    try:
        prompt = parse_ids(args.tokens)
    except ValueError as e:
        ap.error(f"--tokens: {e}")
    try:
        with strata.Device(args.backend) as dev, strata.Model(dev, args.model) as model, \
                model.session(len(prompt) + args.new_tokens) as s:
            t0 = time.perf_counter()
            logits = s.prefill(prompt)
            t_prompt = time.perf_counter() - t0
            out = []
            t0 = time.perf_counter()
            for _ in range(args.new_tokens):
                tok = int(np.argmax(logits))
                out.append(tok)
                if tok == args.eos or len(out) == args.new_tokens:
                    break
                logits = s.prefill([tok])
            t_gen = time.perf_counter() - t0
            print(f"prompt    {_count(len(prompt), 'token')} in {1e3 * t_prompt:.1f} ms")
            print(f"steps     {_count(len(out), 'token')} in {1e3 * t_gen:.1f} ms ({len(out) / max(t_gen, 1e-9):.1f} tokens/s)")
            print("generated " + " ".join(map(str, out)))
    except strata.Error as e:
        sys.exit(f"generate: {e}")


if __name__ == "__main__":
    main()
