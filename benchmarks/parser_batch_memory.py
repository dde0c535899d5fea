"""Resident memory around each training step of the BNA parser: the longest sentence of each batch and the process's
RSS before and after its forward pass (and loss), for the steps of the first epoch on the WSJ sample (Linux).

    python benchmarks/parser_batch_memory.py [--steps 96] [--output-dir DIR]

The parser is ParserConfig's own defaults (`structattn train-parsing --preset full`: all-MiniLM-L6-v2 fine-tuned,
batches of 32 sentences); the six batches with the longest sentences are printed, then the process's peak RSS.
"""
from __future__ import annotations

import argparse
import sys
import tempfile

from machine import cpu_description, peak_rss_kib, rss_bytes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=96, help="training steps (default 96: one epoch)")
    parser.add_argument("--output-dir", default=None, help="the run's folder (default: a temporary one)")
    args = parser.parse_args(argv)

    from structattn.bna import trainer as T
    from structattn.bna.model import ParserConfig

    rows = []
    plain = T.ParserFamily.batch_loss

    def measured(self, batch):
        longest = max(len(self.train_trees[i].leaves()) for i in batch)
        before = rss_bytes()
        loss, weight = plain(self, batch)
        rows.append((longest, len(batch), before / 1e9, rss_bytes() / 1e9))
        return loss, weight

    T.ParserFamily.batch_loss = measured
    out = args.output_dir or tempfile.mkdtemp(prefix="parser-memory-")
    T.train_parser(ParserConfig(output_dir=out), show_progress=False, stop_after_steps=args.steps)
    for row in sorted(rows, key=lambda r: -r[0])[:6]:
        print("longest %d words, batch %d: RSS %.2f GB before the forward, %.2f GB after it" % row)
    print(f"peak RSS {peak_rss_kib() / 1e6:.2f} GB (kilobytes / 10^6); {cpu_description()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
