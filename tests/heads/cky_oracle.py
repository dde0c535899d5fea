"""Brute-force chart decoding: enumerate every binary tree. Independent of structattn.heads.chart."""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def binary_trees(i: int, j: int) -> tuple[frozenset, ...]:
    """Every binary bracketing of fenceposts i..j, as frozensets of spans (a, b) including (i, j)."""
    if j - i == 1:
        return (frozenset({(i, j)}),)
    out = []
    for k in range(i + 1, j):
        for left in binary_trees(i, k):
            for right in binary_trees(k, j):
                out.append(left | right | {(i, j)})
    return tuple(out)


def best_tree(scores, length: int, force_root: bool = True):
    """(best total, labelled spans (i, j, label != 0) as a set) over all binary trees of ``length`` words.

    scores: nested [N][N][C] numbers; a span's label is its best label (the root's best non-empty one when
    ``force_root``); the tree's score sums its spans' label scores.
    """
    def label(i, j):
        row = list(scores[i][j])
        first = 1 if force_root and (i, j) == (0, length) else 0
        lab = max(range(first, len(row)), key=lambda c: (row[c], -c))
        return lab, float(row[lab])

    best_total, best_spans = None, None
    for tree in binary_trees(0, length):
        total, spans = 0.0, set()
        for i, j in tree:
            lab, s = label(i, j)
            total += s
            if lab:
                spans.add((i, j, lab))
        if best_total is None or total > best_total:
            best_total, best_spans = total, spans
    return best_total, best_spans
