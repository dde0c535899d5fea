"""Cost of one n-gram span attention (NSA) layer against n, next to plain self-attention and BiMSA layers, on CPU.

Each variant is one post-LN encoder layer (``structattn.bna.transformer_block.build_layer``) in train mode with
the paper's PTB dropouts (0.2), d_model 256, 8 heads of 32, d_ff 512, batch 32, every sentence L = 40 words
(T = 42 positions). Measured per variant:

* forward + backward time (loss = sum of the outputs; gradients dropped between steps), median of ``--reps``
  repetitions run interleaved (SA, BiMSA, NSA n=1, ..., NSA n=N in every repetition, the order rotated each
  time) after one warm-up step each; ratio = median over repetitions of (variant time / SA time of that
  repetition), which cancels slow drift caused by other processes;
* peak tensor memory of one step: the ``torch.profiler`` memory trace of the CPU allocator, peak of live bytes
  above the state at the start of the step;
* the span matrix size: S spans (S = sum_{g<=n} (L + 1 - g) <= n L) and b * S * d elements.

NSA builds a [b, S, d] span matrix and a [b, H, T, S] attention, so its cost should grow linearly in n.

    python benchmarks/nsa.py                  # the default workload (prints a markdown table)
    python benchmarks/nsa.py --reps 3 --max-n 3
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_flags, cpu_name, peak_bytes  # noqa: E402


class Variant:
    """One layer and its input; ``step()`` = forward + backward."""

    def __init__(self, label: str, kind: str, n: int, args, torch):
        from structattn.bna.fenceposts import ngram_spans
        from structattn.bna.transformer_block import build_layer

        self.label, self.kind, self.n = label, kind, n
        torch.manual_seed(0)
        self.layer = build_layer(kind, d_model=args.d_model, heads=args.heads, d_head=args.d_head, d_ff=args.d_ff,
                                 residual_dropout=0.2, ff_dropout=0.2, attn_dropout=0.2, ngram=n).train()
        self.h = torch.randn(args.batch, args.length + 2, args.d_model)
        self.lengths = torch.full((args.batch,), args.length, dtype=torch.long)
        self.spans = ngram_spans(self.lengths, n, args.length)[0].numel() if kind == "nsa" else 0
        self.span_elements = args.batch * self.spans * args.d_model
        self.times: list[float] = []
        self.ratios: list[float] = []
        self.peak = 0

    def drop_grads(self) -> None:
        for p in self.layer.parameters():
            p.grad = None

    def step(self) -> None:
        self.layer(self.h, self.lengths).sum().backward()

    def timed(self) -> float:
        self.drop_grads()
        t0 = time.perf_counter()
        self.step()
        return time.perf_counter() - t0


def run(args) -> str:
    import torch

    torch.set_num_threads(args.threads)
    variants = [Variant("SA", "sa", 0, args, torch), Variant("BiMSA", "bimsa", 0, args, torch)]
    variants += [Variant(f"NSA n={n}", "nsa", n, args, torch) for n in range(1, args.max_n + 1)]
    for v in variants:  # warm-up: first-call allocations and lazy initialisation
        v.timed()
    for rep in range(args.reps):
        k = rep % len(variants)
        order = variants[k:] + variants[:k]
        times = {v.label: v.timed() for v in order}
        for v in variants:
            v.times.append(times[v.label])
            v.ratios.append(times[v.label] / times["SA"])
    for v in variants:
        v.drop_grads()  # outside the trace: frees made there would be of blocks it never saw allocated
        v.peak = peak_bytes(v.step)

    lines = ["| layer | n | spans S | span-matrix elements (b·S·d) | fwd+bwd ms (median) | × SA | peak MiB |",
             "|---|---|---|---|---|---|---|"]
    for v in variants:
        spans, elements = (f"{v.spans}", f"{v.span_elements:,}") if v.kind == "nsa" else ("-", "-")
        lines.append(f"| {v.label} | {v.n or '-'} | {spans} | {elements} | "
                     f"{1000 * statistics.median(v.times):.1f} | {statistics.median(v.ratios):.2f} | "
                     f"{v.peak / 2 ** 20:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=40, help="words per sentence (T = length + 2)")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-head", type=int, default=32)
    parser.add_argument("--d-ff", type=int, default=512)
    parser.add_argument("--max-n", type=int, default=5)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    import torch

    started = time.time()
    table = run(args)
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, "benchmarks/nsa.py", *argv])
    print("\n".join([
        "# N-gram span attention: cost against n (CPU)",
        "",
        f"Command: `{command}`",
        "",
        f"Device: {cpu_name()}; {cpu_flags()}; {os.cpu_count()} logical CPUs; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads); Python {platform.python_version()}",
        "",
        f"One post-LN layer in train mode (dropouts 0.2), batch {args.batch}, L = {args.length} words "
        f"(T = {args.length + 2}), d_model {args.d_model}, {args.heads} heads x {args.d_head}, d_ff {args.d_ff}; "
        f"median of {args.reps} interleaved repetitions after one warm-up step each; × SA = median over "
        "repetitions of the time ratio to the SA layer in the same repetition; peak = live tensor bytes a step "
        "allocates above its start (torch.profiler memory trace).",
        "",
        table,
        "",
        f"Wall time {time.time() - started:.0f} s.",
    ]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
