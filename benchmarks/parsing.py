"""Parsing throughput of the chart parser: sentences per second, batch 32, sentences of 20, 40 and 80 words.

    python benchmarks/parsing.py [--threads 2] [--repeats 5]

Models are built untrained from the training trees (weights do not change the work): the CPU configuration of
experiments/recipes/parsing.toml (d_model 128, 4 heads of 32, feed-forward 256, label MLP 128), for the
self-attention parser and BNA, without a pretrained encoder (4 layers) and on all-MiniLM-L6-v2 (2 layers).
Inputs: words of the test split's sentences, concatenated and cut to exactly L words, 32 per batch.
Reported: median over interleaved repetitions of one ``parse`` call on the batch (encoder, layers, span
scores, batched CKY, trees), as sentences per second, and each variant's time relative to the
self-attention parser of the same encoder. Prints the CPU model, its vector instruction sets and threads.
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

from structattn.bna.model import ChartParser, ParserConfig  # noqa: E402
from structattn.tasks.ptb import read_split  # noqa: E402

CPU_CONFIG = dict(d_model=128, heads=4, d_head=32, d_ff=256, label_hidden=128)
LENGTHS = (20, 40, 80)
BATCH = 32


def batch_of(words: list[str], length: int) -> list[list[str]]:
    """BATCH sentences of exactly ``length`` words, cut from the stream of test words at different offsets."""
    step = max(1, (len(words) - length) // BATCH)
    return [words[k * step:k * step + length] for k in range(BATCH)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    train = read_split("train")
    words = [w for t in read_split("test") for w in t.leaves()]
    models = {}
    for encoder, enc_name in (("none", "none"), ("", "MiniLM")):
        for variant in ("sa", "bna"):
            cfg = ParserConfig(encoder=encoder, variant=variant, fine_tune_encoder=False, **CPU_CONFIG)
            torch.manual_seed(0)
            models[(enc_name, variant)] = ChartParser.build(cfg, train).eval()
    print(f"CPU: {cpu_description()}")
    print(f"command: python benchmarks/parsing.py --threads {args.threads} --repeats {args.repeats}")
    print()
    print("| encoder | variant | words | sentences/s (median) | time vs self-attention |")
    print("|---|---|---|---|---|")
    for length in LENGTHS:
        batch = batch_of(words, length)
        times = {key: [] for key in models}
        for key, model in models.items():  # warm-up (and fills a frozen encoder's cache: see below)
            with torch.no_grad():
                model.parse(batch, batch_size=BATCH)
        for _ in range(args.repeats):
            for key, model in models.items():  # interleaved repetitions
                for m in model.modules():  # time the encoder too: forget sentences a frozen encoder cached
                    m.__dict__.pop("_frozen_rows", None)
                start = time.perf_counter()
                with torch.no_grad():
                    model.parse(batch, batch_size=BATCH)
                times[key].append(time.perf_counter() - start)
        for (enc_name, variant), ts in times.items():
            med = statistics.median(ts)
            base = statistics.median(times[(enc_name, "sa")])
            print(f"| {enc_name} | {variant} | {length} | {BATCH / med:.1f} | {med / base:.2f}x |")


if __name__ == "__main__":
    main()
