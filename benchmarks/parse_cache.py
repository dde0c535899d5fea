"""Parse cache: time to add N new items and to load them all back (a fake chain parser, 8 words an item).

Run: ``python benchmarks/parse_cache.py 67000`` (docs/robustness.md has the figures).
"""
from __future__ import annotations

import sys
import tempfile
import time

from structattn.dependency import Parse, ParseCache


def chain_parse(chunk, indices):
    for item, index in zip(chunk, indices):
        yield [Parse(item, list(range(len(item))), ["root"] + ["dep"] * (len(item) - 1), ["X"] * len(item),
                     str(index))]


def main(n: int) -> None:
    items = [[f"w{i}", "the", "cat", "sat", "on", "a", "mat", "."] for i in range(n)]
    with tempfile.TemporaryDirectory() as folder:
        cache = ParseCache(folder)
        started = time.perf_counter()
        cache.get_or_parse(items, chain_parse, "fp", "words")
        add = time.perf_counter() - started
        started = time.perf_counter()
        cache.get_or_parse(items, chain_parse, "fp", "words")
        load = time.perf_counter() - started
        assert cache.last_stats.hits == n
    print(f"{n} items: add {add:.2f} s, load {load:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 67000)
