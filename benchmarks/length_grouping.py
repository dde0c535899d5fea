"""Padding with and without ``--group-by-length``: padded tokens per training epoch, per task.

The cost of a training step on CPU grows with batch size x longest sequence in the batch, so the
padded token count of an epoch (sum over batches of rows x longest row) is the work the encoder
does. This counts it for the plain shuffle and the length-grouped order (``seeded_order`` without and
with lengths, as the encoder families batch) on the real train features (tokenised as ``structattn train``
does, plain attention), for the given epoch seeds, and reports the median ratio. No model is run, so the
figure is exact and does not depend on machine load.

    .venv/bin/python benchmarks/length_grouping.py --tasks cola sst2 mrpc stsb rte conll2003 fce \\
        --out results/bench_length_grouping.md
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys


def padded_tokens(order: list[int], lengths: list[int], batch_size: int) -> int:
    """Sum over the DataLoader's batches (consecutive runs of ``batch_size``) of rows x longest row."""
    return sum(len(order[i:i + batch_size]) * max(lengths[j] for j in order[i:i + batch_size])
               for i in range(0, len(order), batch_size))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", nargs="+", default=["cola", "sst2", "mrpc", "stsb", "rte", "conll2003", "fce"])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=5, help="epoch permutations to measure (median reported)")
    ap.add_argument("--out", help="write the markdown table here as well")
    args = ap.parse_args(argv)

    from structattn.train.config import TrainConfig
    from structattn.finetuning.trainer import Trainer
    from structattn.train.engine import epoch_seed, seeded_order

    rows = ["| task | train features | real tokens | padded, shuffled | padded, grouped | shuffled / grouped |",
            "|---|---:|---:|---:|---:|---:|"]
    for task in args.tasks:
        trainer = Trainer(TrainConfig(task=task, mechanism="global", max_length=args.max_length,
                                      batch_size=args.batch_size), show_progress=False)
        _, feats = trainer.features("train", training=True)
        lengths = [len(f["input_ids"]) for f in feats]
        plain, grouped = [], []
        for epoch in range(args.epochs):
            seed = epoch_seed(1, epoch)
            plain.append(padded_tokens(seeded_order(len(lengths), seed), lengths, args.batch_size))
            grouped.append(padded_tokens(seeded_order(len(lengths), seed, lengths, args.batch_size), lengths,
                                         args.batch_size))
        p, g = statistics.median(plain), statistics.median(grouped)
        rows.append(f"| {task} | {len(lengths):,} | {sum(lengths):,} | {p:,.0f} | {g:,.0f} | {p / g:.2f}× |")
        print(rows[-1], flush=True)
    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])
    text = "\n".join([f"Padded tokens per training epoch, batch {args.batch_size}, max length {args.max_length}, "
                      f"all-MiniLM-L6-v2 tokenizer, median over {args.epochs} epoch seeds.", "", *rows, "",
                      f"Command: `{command}`", ""])
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
