"""Time and peak memory of one span-QA update of all-MiniLM-L6-v2 on a CPU, as one forward pass of B windows
against k passes of B/k windows whose gradients add up (``structattn train --batch-size B/k --grad-accum k``).

Each configuration runs in its own process (peak RSS is per process): forward + backward + AdamW of B random
windows of ``--length`` tokens, HF sdpa attention with the encoder's attention dropout (0.1), float32, the first
update a warm-up; the process reports its median seconds per update and its peak RSS. The configurations
alternate (A B A B ...) so that a load change on a shared machine moves both.

    python benchmarks/span_qa_passes.py                        # B = 32, k = 1 and 4, 384 tokens, 3 rounds of 3 updates
    python benchmarks/span_qa_passes.py --passes 1 2 4 8 --rounds 2
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from machine import cpu_description, peak_rss_kib


def one_process(batch: int, passes: int, length: int, updates: int) -> dict:
    """Median seconds per update and peak RSS (GiB) of this process."""
    import torch
    from transformers import AutoModelForQuestionAnswering

    from structattn.settings import default_encoder

    torch.manual_seed(0)
    model = AutoModelForQuestionAnswering.from_pretrained(default_encoder(), attn_implementation="sdpa").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(1000, 20000, (batch, length))
    starts, ends = torch.randint(0, length, (batch,)), torch.randint(0, length, (batch,))
    per = batch // passes
    times = []
    for _ in range(updates + 1):
        t0 = time.perf_counter()
        for p in range(passes):
            part = slice(p * per, (p + 1) * per)
            out = model(input_ids=ids[part], attention_mask=torch.ones_like(ids[part]), start_positions=starts[part],
                        end_positions=ends[part])
            (out.loss / passes).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return {"s_per_update": statistics.median(times[1:]),
            "peak_rss_gib": peak_rss_kib() / 2 ** 20}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="windows per update (default 32)")
    parser.add_argument("--passes", type=int, nargs="*", default=[1, 4], help="forward passes per update (default 1 4)")
    parser.add_argument("--length", type=int, default=384, help="tokens per window (default 384)")
    parser.add_argument("--updates", type=int, default=3, help="timed updates per process (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="processes per configuration, alternating (default 3)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if any(args.batch % k for k in args.passes):
        parser.error(f"--batch {args.batch} is not divisible by every --passes value {args.passes}")
    if args.child is not None:
        print(json.dumps(one_process(args.batch, args.child, args.length, args.updates)))
        return 0
    runs = {k: [] for k in args.passes}
    for r in range(args.rounds):
        for k in args.passes:
            cmd = [sys.executable, __file__, "--batch", str(args.batch), "--length", str(args.length), "--updates",
                   str(args.updates), "--child", str(k)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[k].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}, {args.batch // k} x {k}: {runs[k][-1]}", flush=True)
    threads = os.environ.get("OMP_NUM_THREADS", "torch's default")
    print(f"\n{args.batch} windows of {args.length} tokens per update, OMP_NUM_THREADS={threads}, "
          f"{args.rounds} processes x {args.updates} updates each; {cpu_description()}")
    print("| per pass x passes | s per update (median of process medians) | ratio to 1 pass | peak RSS (max, GiB) |")
    print("|---|---|---|---|")
    base = statistics.median(r["s_per_update"] for r in runs[args.passes[0]])
    for k, rs in runs.items():
        s = statistics.median(r["s_per_update"] for r in rs)
        peak = max(r["peak_rss_gib"] for r in rs)
        print(f"| {args.batch // k} x {k} | {s:.2f} | {s / base:.2f}x | {peak:.2f} GiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
