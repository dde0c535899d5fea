"""Batched CKY (heads.chart.cky_decode) against the plain Python CKY (heads.chart.reference_cky).

    python benchmarks/cky.py [--threads 2] [--repeats 5]

Batch of 32 sentences of 20, 40 and 80 words, random label scores with C = 30 labels (the decoder's work does
not depend on the values). Median of interleaved repetitions; per-sentence time of each and the speed-up.
Prints the CPU model, its vector instruction sets and the torch threads.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_description  # noqa: E402

from structattn.heads.chart import cky_decode, reference_cky  # noqa: E402

BATCH, LABELS = 32, 30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_description()}")
    print(f"command: python benchmarks/cky.py --threads {args.threads} --repeats {args.repeats}")
    print()
    print("| words | batched ms/sentence | Python ms/sentence | speed-up |")
    print("|---|---|---|---|")
    for n in (20, 40, 80):
        scores = torch.randn(BATCH, n + 1, n + 1, LABELS, generator=torch.Generator().manual_seed(n))
        lengths = [n] * BATCH
        arrays = [scores[k].numpy() for k in range(BATCH)]
        batched, plain = [], []
        cky_decode(scores, lengths)  # warm-up (index caches)
        for _ in range(args.repeats):
            start = time.perf_counter()
            cky_decode(scores, lengths)
            batched.append(time.perf_counter() - start)
            start = time.perf_counter()
            for a in arrays:
                reference_cky(a, n)
            plain.append(time.perf_counter() - start)
        b, p = statistics.median(batched) / BATCH, statistics.median(plain) / BATCH
        print(f"| {n} | {1000 * b:.3f} | {1000 * p:.2f} | {p / b:.1f}x |")


if __name__ == "__main__":
    main()
