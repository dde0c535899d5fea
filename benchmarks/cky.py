"""Batched CKY (bna.chart.cky_decode) against the plain Python CKY (bna.chart.reference_cky).

For each sentence length L, a batch of random label scores [b, L + 1, L + 1, C] (default b = 32, C = 30)
is decoded once by ``cky_decode`` (the whole batch in one call) and once by ``reference_cky`` (a loop over
the b sentences), alternating, for ``--reps`` repetitions after one warm-up of each; times are per sentence,
medians over repetitions, and the speed-up is the median of the per-repetition ratios (both measured in the
same repetition, so slow drift from other processes on the machine cancels). Both decoders are checked to
return the same trees. The script prints the CPU model and its AVX2/AVX-512 flags and the torch thread count.

    python benchmarks/cky.py                          # lengths 20 40 80, batch 32, 5 repetitions, 1 thread
    python benchmarks/cky.py --lengths 40 --reps 9
    python benchmarks/cky.py --out results/bench_cky_cpu.md
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_flags, cpu_name  # noqa: E402

from structattn.bna.chart import cky_decode, reference_cky  # noqa: E402


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(length: int, batch: int, labels: int, reps: int, device: str, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed + length)
    scores = torch.randn(batch, length + 1, length + 1, labels, generator=g)
    scores[..., 0] = 0.0  # the empty label, as the span scorer makes it
    on_device = scores.to(device)
    as_numpy = [scores[k].numpy() for k in range(batch)]
    lengths = [length] * batch

    def batched():
        return cky_decode(on_device, lengths)  # returns Python lists, so the device work is complete

    def reference():
        return [reference_cky(x, length) for x in as_numpy]

    got, want = batched(), reference()  # warm-up (the batched decoder builds its buffers once per shape)
    mismatches = sum(a[1] != b[1] for a, b in zip(got, want))
    t_batched, t_reference, ratios = [], [], []
    for _ in range(reps):
        tb = timed(batched)
        tr = timed(reference)
        t_batched.append(tb / batch)
        t_reference.append(tr / batch)
        ratios.append(tr / tb)
    return {
        "length": length,
        "batched_ms": statistics.median(t_batched) * 1e3,
        "reference_ms": statistics.median(t_reference) * 1e3,
        "speedup": statistics.median(ratios),
        "speedup_range": (min(ratios), max(ratios)),
        "mismatches": mismatches,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[20, 40, 80])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--labels", type=int, default=30)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: the Python reference runs on one core too)")
    parser.add_argument("--device", default="cpu", help="device of the batched decoder (the reference is Python)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the report as markdown here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    model, flags = cpu_name(), cpu_flags()
    header = [
        f"command: python {' '.join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])}",
        f"cpu: {model} ({flags}); torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
        f"batched decoder on {args.device}",
        f"batch {args.batch}, {args.labels} labels, median of {args.reps} interleaved repetitions after a warm-up",
    ]
    rows = [measure(n, args.batch, args.labels, args.reps, args.device, args.seed) for n in args.lengths]
    table = ["| length | batched CKY, ms/sentence | Python CKY, ms/sentence | speed-up (min-max) | trees differ |",
             "|---:|---:|---:|---:|---:|"]
    for r in rows:
        lo, hi = r["speedup_range"]
        table.append(f"| {r['length']} | {r['batched_ms']:.3f} | {r['reference_ms']:.3f} | "
                     f"{r['speedup']:.1f}x ({lo:.1f}-{hi:.1f}) | {r['mismatches']} |")
    report = "\n".join(header + [""] + table)
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        body = report.replace("\n", "\n\n", len(header) - 1)  # markdown paragraphs for the header lines
        args.out.write_text("# Batched CKY vs plain Python CKY\n\n" + body + "\n")
    return 1 if any(r["mismatches"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
