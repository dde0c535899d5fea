"""Cost of SG-Net's extra layer: train step and inference of the span-QA model, SG-Net (dual) vs the baseline.

    python benchmarks/sgnet.py [--length 384] [--batch 8] [--repeats 5] [--threads 2] [--out FILE.md]

Both models are all-MiniLM-L6-v2 (the offline default) with the span-QA head; SG-Net adds the syntax-guided layer
and the dual aggregation (and ``--aggregations`` more if asked). Inputs: random token ids, ``--batch`` sequences of
``--length`` tokens; the SG mask is the SDOI mask of random dependency trees over sentences of 15-30 tokens
(its density does not change the cost of the masked SDPA call, only its shape does). Reported: median over
interleaved repetitions (A B A B ...) of a forward+backward+AdamW step and of a no-grad forward, each as a ratio to
the baseline's in the same repetition, and the peak of live tensor bytes of one train step. Prints the CPU model,
its vector instruction sets and the thread count.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_description, peak_bytes  # noqa: E402

from structattn.settings import default_encoder  # noqa: E402
from structattn.sgnet.model import SGNetConfig, SGNetModel  # noqa: E402
from structattn.structure.relations import ancestor_matrices  # noqa: E402


def sdoi_masks(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    """[batch, length, length] bool: block-diagonal SDOI masks of random trees (sentences of 15-30 tokens),
    position 0 ([CLS]) and the last ([SEP]) seeing only themselves."""
    rng = np.random.default_rng(seed)
    out = np.zeros((batch, length, length), dtype=bool)
    for b in range(batch):
        out[b, 0, 0] = out[b, -1, -1] = True
        start = 1
        while start < length - 1:
            n = min(int(rng.integers(15, 31)), length - 1 - start)
            heads = np.array([[0] + [int(rng.integers(1, i + 1)) for i in range(1, n)]])  # a random tree, 1-based
            out[b, start:start + n, start:start + n] = ancestor_matrices(heads)[0]
            start += n
    return torch.from_numpy(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=384)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--aggregations", nargs="+", default=["dual"])
    ap.add_argument("--out", type=Path, help="also write the report as markdown here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    name = default_encoder()
    models = {}
    for agg in ["none", *args.aggregations]:
        torch.manual_seed(0)
        models[agg] = SGNetModel.from_encoder(name, SGNetConfig(aggregation=agg, head="span_qa"))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 20000, (args.batch, args.length), generator=g)
    inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
    sg = dict(sg_mask=sdoi_masks(args.batch, args.length), sg_tokens=torch.ones_like(ids, dtype=torch.bool))
    sg["sg_tokens"][:, [0, -1]] = False
    labels = dict(start_positions=torch.zeros(args.batch, dtype=torch.long),
                  end_positions=torch.zeros(args.batch, dtype=torch.long))
    optims = {k: torch.optim.AdamW(m.parameters(), lr=1e-5) for k, m in models.items()}

    def batch_for(agg):
        return {**inputs, **({} if agg == "none" else sg)}

    def train_step(agg):
        model = models[agg]
        model.train()
        loss = model(**batch_for(agg), **labels).loss
        loss.backward()
        optims[agg].step()
        optims[agg].zero_grad(set_to_none=True)

    def infer(agg):
        model = models[agg]
        model.eval()
        with torch.no_grad():
            model(**batch_for(agg))

    times = {(kind, agg): [] for kind in ("train", "infer") for agg in models}
    for agg in models:  # warm-up
        train_step(agg)
        infer(agg)
    for _ in range(args.repeats):
        for kind, fn in (("train", train_step), ("infer", infer)):
            for agg in models:
                start = time.perf_counter()
                fn(agg)
                times[(kind, agg)].append(time.perf_counter() - start)
    peaks = {agg: peak_bytes(lambda a=agg: train_step(a)) for agg in models}

    command = " ".join(["python benchmarks/sgnet.py"] + sys.argv[1:])
    lines = ["# SG-Net's extra layer: cost against the baseline (span QA, all-MiniLM-L6-v2)", "",
             f"command: `{command}`", "", f"CPU: {cpu_description()}", "",
             f"batch {args.batch} x {args.length} tokens; median of {args.repeats} interleaved repetitions after a "
             "warm-up; ratio = median over repetitions of the time ratio to the baseline in the same repetition; "
             "peak = live tensor bytes one train step allocates above its start", "",
             "| model | train step s | × baseline | inference s | × baseline | train peak MiB | × baseline |",
             "|---|---|---|---|---|---|---|"]
    for agg in models:
        row = [agg if agg != "none" else "baseline"]
        for kind in ("train", "infer"):
            med = statistics.median(times[(kind, agg)])
            ratio = statistics.median(a / b for a, b in zip(times[(kind, agg)], times[(kind, "none")]))
            row += [f"{med:.3f}", f"{ratio:.3f}"]
        row += [f"{peaks[agg] / 2**20:.1f}", f"{peaks[agg] / peaks['none']:.3f}"]
        lines.append("| " + " | ".join(row) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
