"""Brute-force oracle for the chart decoder: score every binary bracketing of a sentence.

Independent of structattn.bna.chart (never import it here). Sizes up to 7 words: 132 bracketings.
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def bracketings(i: int, j: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """All binary trees over fenceposts i..j, each a tuple of its spans (a, b) (the span (i, j) included)."""
    if j - i == 1:
        return (((i, j),),)
    trees = []
    for k in range(i + 1, j):
        for left in bracketings(i, k):
            for right in bracketings(k, j):
                trees.append(((i, j),) + left + right)
    return tuple(trees)


def span_choice(row, is_root: bool, force_root: bool) -> tuple[int, float]:
    """(label, score) a span takes: its best label; the root's best non-empty one when forced."""
    candidates = range(1, len(row)) if is_root and force_root else range(len(row))
    label = max(candidates, key=lambda c: row[c])
    return label, float(row[label])


def brute_best(scores, length: int, force_root: bool = True):
    """scores: nested [N][N][C] numbers -> (best total, set of labelled spans (i, j, label != 0), the number of
    trees reaching the best total within 1e-9: with random scores it must be 1 for the comparison to mean anything).
    """
    if length == 0:
        return 0.0, set(), 1
    results = []
    for tree in bracketings(0, length):
        total, labelled = 0.0, set()
        for i, j in tree:
            label, score = span_choice(scores[i][j], (i, j) == (0, length), force_root)
            total += score
            if label:
                labelled.add((i, j, label))
        results.append((total, labelled))
    best = max(total for total, _ in results)
    winners = [labelled for total, labelled in results if total > best - 1e-9]
    return best, winners[0], len(winners)
