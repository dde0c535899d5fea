"""A writer process for the two-writer cache test (importable by multiprocessing's spawn)."""
from __future__ import annotations

import time
from pathlib import Path

from structattn.dependency import Parse, ParseCache
from structattn.dependency.cache import open_store


def chain_parse(items, indices):
    """One chain tree per item (word k's head is word k-1)."""
    for item, index in zip(items, indices):
        yield [Parse(list(item), list(range(len(item))), ["root"] + ["dep"] * (len(item) - 1), ["X"] * len(item),
                     str(index))]


def writer_items(writer: int, count: int) -> list[list[str]]:
    """The items writer ``writer`` adds: disjoint from every other writer's."""
    return [[f"writer{writer}", f"item{i}", "."] for i in range(count)]


def add_items(directory: str, writer: int, count: int, flush_items: int, batch: int) -> tuple[int, int]:
    """Add ``count`` new items in calls of ``batch`` items, written every ``flush_items``; (misses, write errors)."""
    cache, items = ParseCache(directory, flush_items=flush_items), writer_items(writer, count)
    misses = errors = 0
    for start in range(0, count, batch):
        cache.get_or_parse(items[start:start + batch], chain_parse, "fake-parser v1", "words")
        misses, errors = misses + cache.last_stats.misses, errors + cache.last_stats.write_errors
    return misses, errors


def open_at(directory: str, start: float) -> str:
    """Open the cache in ``directory`` once the clock reaches ``start`` (so two processes open it together);
    "ok", or the error."""
    while time.time() < start:
        pass
    try:
        open_store(Path(directory)).close()
    except Exception as exc:  # reported to the test, which shows it
        return repr(exc)
    return "ok"
