"""Structure pipeline cost, measured in one run: parse -> word-level masks -> cached re-parse.

For the first N SST-2 train rows (default 2000), each repeat does, in this order:

1. parse with the spaCy backend through a fresh, empty cache (parse + shard write);
2. build word-level masks for every parsed sentence with
   ``structattn.structure.relations.batch_word_masks(parses, relation="sla", m=3)``;
3. the same ``parse_cached`` call again with a new, not yet loaded parser object, as a second
   process would do it (only the cache is read; the spaCy pipeline is never loaded).

Reported: sentences/s of each step and two ratios (median over repeats):
mask time / parse time (target <= 10%) and first run / cached rerun (target >= 50x).
The model is loaded once before timing; its load time is printed separately.

    MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=536870912 \\
        .venv/bin/python benchmarks/structure_pipeline.py [--n 2000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time

ENV_VARS = ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "STRUCTATTN_DATA"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="SST-2 train rows to parse (default 2000)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats; medians are reported (default 3)")
    ap.add_argument("--parser", default=None, help="spaCy pipeline (default: the library default)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--relation", default="sla")
    ap.add_argument("--m", type=int, default=3)
    args = ap.parse_args(argv)

    import numpy as np
    import spacy

    from structattn.dependency.cache import ParseCache, parse_cached
    from structattn.dependency.datasets import dataset_sentences
    from structattn.dependency.spacy_backend import SpacyParser
    from structattn.settings import DEFAULT_SPACY_MODEL
    from structattn.structure.relations import batch_word_masks

    model = args.parser or DEFAULT_SPACY_MODEL
    print("command:", " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]))
    print("environment:", " ".join(f"{k}={os.environ[k]}" if k in os.environ else f"{k}=<unset>" for k in ENV_VARS))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}, spacy {spacy.__version__}, numpy {np.__version__}")

    items = dataset_sentences("sst2", "train")[:args.n]
    parser = SpacyParser(model=model, batch_size=args.batch_size)
    t = time.perf_counter()
    parser.nlp  # load once, outside the timed region
    print(f"model {model}: loaded in {time.perf_counter() - t:.2f} s; {len(items):,} items, "
          f"{sum(map(len, items)):,} words; relation={args.relation} m={args.m}")

    rows = []
    for rep in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="structattn-bench-") as tmp:
            cache = ParseCache(tmp)
            t = time.perf_counter()
            passages = parse_cached(items, parser, cache=cache, kind="words")
            parse_s = time.perf_counter() - t
            assert cache.last_stats.parsed_items == len(items)

            sentences = [p for passage in passages for p in passage]
            t = time.perf_counter()
            masks = batch_word_masks(sentences, relation=args.relation, m=args.m)
            mask_s = time.perf_counter() - t
            assert len(masks) == len(sentences)

            fresh = SpacyParser(model=model, batch_size=args.batch_size)  # never loads the pipeline
            t = time.perf_counter()
            again = parse_cached(items, fresh, cache=ParseCache(tmp), kind="words")
            cached_s = time.perf_counter() - t
            assert fresh._nlp is None and again == passages
        rows.append((parse_s, mask_s, cached_s, len(sentences)))
        print(f"repeat {rep + 1}: parse {parse_s:.3f} s ({len(sentences) / parse_s:,.0f} sentences/s) | "
              f"masks {mask_s:.4f} s ({len(sentences) / mask_s:,.0f} sentences/s) | "
              f"cached rerun {cached_s:.4f} s | mask/parse {mask_s / parse_s:.2%} | "
              f"first/cached {parse_s / cached_s:.0f}x")

    med = {name: statistics.median(r[k] for r in rows) for k, name in enumerate(["parse", "mask", "cached"])}
    n_sent = rows[0][3]
    mask_ratio = statistics.median(r[1] / r[0] for r in rows)
    speedup = statistics.median(r[0] / r[2] for r in rows)
    print(f"median over {len(rows)} repeats, {n_sent:,} sentences:")
    lines = [("parse (spaCy, cold cache)", med["parse"]), (f"word masks ({args.relation}, m={args.m})", med["mask"]),
             ("cached rerun", med["cached"])]
    for label, seconds in lines:
        print(f"  {label:<30}{seconds:9.4f} s {n_sent / seconds:12,.0f} sentences/s")
    print(f"  {'mask time / parse time':<30}{mask_ratio:9.2%}   (target <= 10%: {'met' if mask_ratio <= 0.10 else 'NOT met'})")
    print(f"  {'first run / cached rerun':<30}{speedup:9.1f}x  (target >= 50x: {'met' if speedup >= 50 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
