"""Word-level relations over a dependency tree.

Notation: a sentence has n words; ``heads`` are 1-based with 0 for the root
(the [`Parse`][structattn.dependency.record.Parse] convention). Every mask is a numpy
``bool`` array of shape ``[n, n]``: row = query word i, column = key word j,
``True`` = i may attend j. Every mask has a True diagonal, so no row is empty.

The vectorised functions work on a *group* of sentences of equal length
(``heads`` of shape ``[B, n]``); [`batch_word_masks`][structattn.structure.relations.batch_word_masks] groups arbitrary
sentences by length so that a whole dataset costs a few dozen numpy calls.
Each has a plain brute-force twin in ``tests/structure`` (BFS over adjacency lists).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

# ---------------------------------------------------------------- tree primitives


def parents(heads: Sequence[int]) -> np.ndarray:
    """0-based parent of every word, -1 for the root. ``[n]`` int64."""
    return np.asarray(heads, dtype=np.int64) - 1


def ancestor_matrices(heads: np.ndarray) -> np.ndarray:
    """``A[b, i, j]`` = word j is word i or one of its ancestors.

    Args:
        heads: ``[B, n]`` ints, 1-based, 0 = root; every row must be a tree
            (see [`structattn.dependency.validate_tree`][structattn.dependency.record.validate_tree]).
    Returns:
        ``[B, n, n]`` bool.

    Walks every word up to the root in lock-step, one level per iteration, so
    the loop runs (tree depth) times, not n times per word.
    """
    heads = np.asarray(heads, dtype=np.int64)
    B, n = heads.shape
    par = heads - 1
    anc = np.zeros((B, n, n), dtype=bool)
    anc[:, np.arange(n), np.arange(n)] = True
    cur = par.copy()
    for _ in range(n):  # a tree's depth is < n; the bound guards against a cyclic input
        live = cur >= 0
        if not live.any():
            break
        b, i = np.nonzero(live)
        anc[b, i, cur[b, i]] = True
        cur = np.where(live, np.take_along_axis(par, np.maximum(cur, 0), axis=1), -1)
    return anc


def tree_distances(heads: np.ndarray) -> np.ndarray:
    """Path length between every two words in the undirected tree (ROOT arc excluded).

    Args:
        heads: ``[B, n]`` ints, 1-based, 0 = root.
    Returns:
        ``[B, n, n]`` int32, ``dist[b, i, j]`` = edges on the path from i to j.

    dist(i, j) = depth(i) + depth(j) - 2 depth(lca(i, j)); the ancestors of the
    lca are exactly the common ancestors of i and j, so depth(lca) + 1 is the
    number of common ancestors-or-self, a batched matrix product.
    """
    anc = ancestor_matrices(heads)
    a = anc.astype(np.float32)
    depth = a.sum(-1) - 1.0  # [B, n]
    common = a @ a.transpose(0, 2, 1)  # [B, n, n], = depth(lca) + 1
    dist = depth[:, :, None] + depth[:, None, :] - 2.0 * (common - 1.0)
    return np.rint(dist).astype(np.int32)


def neighbour_min_distances(dist: np.ndarray) -> np.ndarray:
    """SLA's D(i, j) = min over k in {i-1, i, i+1} (inside the sentence) of dist(k, j).

    Args:
        dist: ``[B, n, n]`` tree distances.
    Returns:
        ``[B, n, n]`` same dtype.
    """
    d = dist.copy()
    np.minimum(d[:, 1:, :], dist[:, :-1, :], out=d[:, 1:, :])  # k = i - 1
    np.minimum(d[:, :-1, :], dist[:, 1:, :], out=d[:, :-1, :])  # k = i + 1
    return d


# ---------------------------------------------------------------- relations (group form)


def sla_masks(heads: np.ndarray, m: int = 3) -> np.ndarray:
    """SLA local mask: i may attend j iff D(i, j) <= m. ``[B, n]`` heads -> ``[B, n, n]`` bool."""
    _check_threshold("m", m)
    return neighbour_min_distances(tree_distances(heads)) <= m


def tree_distance_masks(heads: np.ndarray, m: int = 3) -> np.ndarray:
    """Plain tree-distance mask (no neighbour minimum): dist(i, j) <= m. ``[B, n, n]`` bool."""
    _check_threshold("m", m)
    return tree_distances(heads) <= m


def band(n: int, m: int, k: int) -> np.ndarray:
    """|i - j| <= k for query positions i < n and key positions j < m: ``[n, m]`` bool.

    The one definition of a window: over words ([`window_masks`][structattn.structure.relations.window_masks]) and over
    token positions (the ``window_unit="token"`` mask that the collator and the attention function both build from it).
    """
    _check_threshold("k", k)
    return np.abs(np.arange(n)[:, None] - np.arange(m)[None, :]) <= k


def window_masks(heads: np.ndarray, k: int = 3) -> np.ndarray:
    """Window mask over words (WLA; Xu et al.'s local pattern): |i - j| <= k. ``[B, n, n]`` bool."""
    B, n = np.asarray(heads).shape
    return np.broadcast_to(band(n, n, k), (B, n, n)).copy()


def sdoi_masks(heads: np.ndarray) -> np.ndarray:
    """SG-Net's SDOI mask: i may attend j iff j == i or j is an ancestor of i. ``[B, n, n]`` bool."""
    return ancestor_matrices(heads)


def forward_masks(heads: np.ndarray) -> np.ndarray:
    """BNA forward mask: i may attend j iff j >= i. ``[B, n, n]`` bool."""
    B, n = np.asarray(heads).shape
    return np.broadcast_to(np.triu(np.ones((n, n), dtype=bool)), (B, n, n)).copy()


def backward_masks(heads: np.ndarray) -> np.ndarray:
    """BNA backward mask: i may attend j iff j <= i. ``[B, n, n]`` bool."""
    B, n = np.asarray(heads).shape
    return np.broadcast_to(np.tril(np.ones((n, n), dtype=bool)), (B, n, n)).copy()


def all_masks(heads: np.ndarray) -> np.ndarray:
    """Every pair allowed (global attention through the same code path). ``[B, n, n]`` bool."""
    B, n = np.asarray(heads).shape
    return np.ones((B, n, n), dtype=bool)


def _check_threshold(name: str, value) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


@dataclass(frozen=True)
class Relation:
    """A named word-level relation: ``fn(heads [B, n], **options) -> [B, n, n] bool``."""

    name: str
    fn: Callable[..., np.ndarray]
    options: tuple[str, ...]
    doc: str


RELATIONS: dict[str, Relation] = {
    "sla": Relation("sla", sla_masks, ("m",), "tree distance from i or a neighbour of i to j <= m (SLA)"),
    "tree": Relation("tree", tree_distance_masks, ("m",), "tree distance dist(i, j) <= m"),
    "window": Relation("window", window_masks, ("k",), "|i - j| <= k (WLA, hybrid)"),
    "sdoi": Relation("sdoi", sdoi_masks, (), "j is i or an ancestor of i (SG-Net)"),
    "forward": Relation("forward", forward_masks, (), "j >= i (BNA)"),
    "backward": Relation("backward", backward_masks, (), "j <= i (BNA)"),
    "all": Relation("all", all_masks, (), "every pair (global)"),
}


def get_relation(name: str) -> Relation:
    """Look a relation up by name; an unknown name fails listing the valid ones."""
    try:
        return RELATIONS[name]
    except KeyError:
        raise ValueError(f"unknown relation {name!r}; valid relations: {', '.join(sorted(RELATIONS))}") from None


# ---------------------------------------------------------------- whole datasets


def batch_word_masks(parses: Sequence, relation: str, **options) -> list[np.ndarray]:
    """Word-level masks for many sentences, computed group-wise by sentence length.

    Args:
        parses: [`Parse`][structattn.dependency.record.Parse] records (or anything with ``.heads``).
        relation: a name in `RELATIONS`.
        **options: the relation's options (``m`` for sla/tree, ``k`` for window);
            options the relation does not take are ignored.
    Returns:
        one ``[n_s, n_s]`` bool array per sentence, in input order.
    """
    rel = get_relation(relation)
    opts = {k: v for k, v in options.items() if k in rel.options and v is not None}
    by_length: dict[int, list[int]] = defaultdict(list)
    for idx, p in enumerate(parses):
        by_length[len(p.heads)].append(idx)
    out: list[np.ndarray | None] = [None] * len(parses)
    for n, members in by_length.items():
        # Chunk very large groups so a [B, n, n] float buffer stays small.
        chunk = max(1, (1 << 22) // max(1, n * n))
        for start in range(0, len(members), chunk):
            ids = members[start:start + chunk]
            heads = np.array([parses[i].heads for i in ids], dtype=np.int64).reshape(len(ids), n)
            masks = rel.fn(heads, **opts)
            for i, mask in zip(ids, masks):
                out[i] = mask
    return out  # type: ignore[return-value]


def word_mask(heads: Sequence[int], relation: str, **options) -> np.ndarray:
    """One sentence's ``[n, n]`` bool mask (convenience around the group form)."""
    rel = get_relation(relation)
    opts = {k: v for k, v in options.items() if k in rel.options and v is not None}
    return rel.fn(np.asarray([heads], dtype=np.int64), **opts)[0]
