"""Spreading a feature build over the cores: contiguous chunks cut where a key changes, each built in a forked
worker process (what the span-QA and multiple-choice feature builders use)."""
from __future__ import annotations

import signal
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


#: the signals the command line turns into an exception (`structattn.stopping`): a pool's workers handle them alike
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _start_worker() -> None:
    """A forked worker's first act: SIGTERM ends it and SIGINT is left to the parent, whatever handlers the parent
    had set; then the two are let through (`forked_map` forks with them blocked, so one sent before this ran waits
    for these handlers). The pool ends its workers by SIGTERM: the command line's handler would turn it into an
    exception with a traceback on stderr or, in a worker forked inside a region a signal must not cut, only remember
    it, and the pool would wait for that worker for ever."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent stops the pool
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


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
        # fork with SIGTERM and SIGINT blocked: a worker inherits the mask, not a signal pending here, and lets them
        # through once it has its own handlers (_start_worker); here they are let through again at once
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            pool = mp.get_context("fork").Pool(workers, initializer=_start_worker)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        with pool:
            return pool.map(_run_forked_job, bounds, chunksize=1)
    finally:
        _FORK_JOB.clear()
