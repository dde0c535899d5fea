"""Spreading a feature build over the cores: contiguous chunks cut where a key changes, each built in a forked
worker process (what the span-QA and multiple-choice feature builders use)."""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar


def contiguous_chunks(keys: Sequence, parts: int) -> list[tuple[int, int]]:
    """About ``parts`` contiguous ``[start, end)`` ranges over ``keys`` (one per item), cut only where the key
    changes: how the feature builders split questions over worker processes without splitting a paragraph or a
    passage (each is then tokenised and parsed in one process)."""
    size = max(1, -(-len(keys) // parts))
    bounds, start = [], 0
    while start < len(keys):
        end = min(start + size, len(keys))
        while end < len(keys) and keys[end] == keys[end - 1]:
            end += 1
        bounds.append((start, end))
        start = end
    return bounds


T = TypeVar("T")

#: The job of `forked_map`'s workers: set before the fork (the fork copies it; it is never pickled).
_FORK_JOB: dict = {}


def _run_forked_job(bounds: tuple[int, int]):
    return _FORK_JOB["build"](bounds)


def forks_pay(items: int, workers: int) -> bool:
    """Whether `forked_map` is worth it (and possible): several workers, two items each, and fork."""
    import multiprocessing as mp

    return workers > 1 and items >= 2 * workers and "fork" in mp.get_all_start_methods()


def forked_map(build: Callable[[tuple[int, int]], T], bounds: Sequence[tuple[int, int]], workers: int) -> list[T]:
    """``[build(b) for b in bounds]`` in ``workers`` forked processes (results in ``bounds``' order): how the
    feature builders spread contiguous chunks (`contiguous_chunks`) over the cores. ``build`` may close over
    anything (a tokenizer, the questions): the fork copies it, only its results are pickled."""
    import multiprocessing as mp

    _FORK_JOB["build"] = build
    try:
        with mp.get_context("fork").Pool(workers) as pool:
            return pool.map(_run_forked_job, bounds, chunksize=1)
    finally:
        _FORK_JOB.clear()
