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
# The token list is read as prefill.py reads it (this folder is on sys.path when the script runs):
# ids stay Python ints, so strata.Session.prefill checks that int32 holds them (4294967297 is
# refused, not wrapped to 1).
from prefill import _count, parse_ids


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
