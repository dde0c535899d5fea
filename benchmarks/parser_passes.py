"""Time of the parser's training batches that ``--max-chart-cells`` cuts into passes, in one pass against in passes.

    python benchmarks/parser_passes.py [--reps 5] [--max-chart-cells 100000]

The parser is ``train-parsing``'s laptop preset (frozen all-MiniLM-L6-v2, d 128) without POS tags (so no spaCy
tagging is needed); the batches are the first epoch's on the WSJ sample (seed 42, grouped by length). Only the
batches over the budget run differently, so only they are timed: forward + backward of each such batch, as one pass
(``--max-chart-cells 0``) and in its passes, alternating, ``--reps`` times; gradients are cleared in between and
no optimizer step is taken. Prints each batch's chart cells and passes, the median seconds of both ways, their
ratio, and the median seconds of one whole epoch's batches in one pass (for the share the cut batches take).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from machine import cpu_description


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="alternating repetitions (default 5)")
    parser.add_argument("--max-chart-cells", type=int, default=100_000, help="the budget (default 100000)")
    args = parser.parse_args(argv)

    import torch

    from structattn.bna.model import PARSER_PRESETS, ChartParser, ParserConfig
    from structattn.bna.trainer import TreebankFiles, chart_passes, epoch_batches

    torch.manual_seed(0)
    config = ParserConfig(**{**PARSER_PRESETS["laptop"], "pos": "none"})
    trees = TreebankFiles().read("train")
    lengths = [len(t.leaves()) for t in trees]
    model = ChartParser.build(config, trees).train()
    batches = epoch_batches(len(trees), config.batch_size, config.seed, 0, lengths)
    cut = [b for b in batches if len(chart_passes(b, lengths, args.max_chart_cells)) > 1]

    def run(batch, budget) -> float:
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        for part, share in chart_passes(batch, lengths, budget):
            (model.loss([trees[i] for i in part]) * share).backward()
        return time.perf_counter() - start

    times = {0: [], args.max_chart_cells: []}
    for rep in range(args.reps + 1):  # the first round warms up
        for budget in ((0, args.max_chart_cells) if rep % 2 == 0 else (args.max_chart_cells, 0)):
            spent = sum(run(b, budget) for b in cut)
            if rep:
                times[budget].append(spent)
    whole = [sum(run(b, 0) for b in batches) for _ in range(2)]
    for b in cut:
        longest = max(lengths[i] for i in b)
        parts = chart_passes(b, lengths, args.max_chart_cells)
        print(f"batch of {len(b)} trees, longest {longest} words: {len(b) * (longest + 1) ** 2:,} chart cells -> "
              f"{len(parts)} passes of {[len(p) for p, _ in parts]} trees")
    one, passes = statistics.median(times[0]), statistics.median(times[args.max_chart_cells])
    print(f"the {len(cut)} cut batches, forward + backward, median of {args.reps}: one pass {one:.2f} s, "
          f"in passes {passes:.2f} s ({passes / one:.2f}x)")
    print(f"all {len(batches)} batches of an epoch in one pass (forward + backward, no optimizer step), median of 2: "
          f"{statistics.median(whole):.2f} s; {cpu_description()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
