"""Compact per-example structure: word-level relation blocks, one per sentence.

An example is one or two segments (a sentence pair), each a passage of one or
more sentences. Words are numbered globally in reading order: the words of
segment 0's sentences, then segment 1's. Only the per-sentence blocks are
stored (sum of n_s^2 bits), never a dense [T, T] token mask.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .relations import batch_word_masks


@dataclass
class WordStructure:
    """Word-level structure of one example.

    Attributes:
        blocks: one ``[n_s, n_s]`` bool mask per sentence (row = query word).
        segments: segment index (0 or 1) of each sentence.
        punct: ``[N]`` bool, word is punctuation (UPOS PUNCT); N = total words.
        parents: ``[N]`` int, global index of each word's head word, -1 for a sentence root
            (the target of LISA-style parent supervision).
    """

    blocks: list[np.ndarray]
    segments: list[int]
    punct: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    parents: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def num_words(self) -> int:
        return int(sum(b.shape[0] for b in self.blocks))

    def segment_of_word(self) -> np.ndarray:
        """``[N]`` int: segment (0/1) of each word."""
        return np.repeat(np.asarray(self.segments, dtype=np.int64), [b.shape[0] for b in self.blocks])


def build_word_structures(passages_a: Sequence[Sequence], passages_b: Sequence[Sequence] | None,
                          relation: str, **options) -> list[WordStructure]:
    """Word structures for many examples at once (masks computed grouped by sentence length).

    Args:
        passages_a: per example, the list of [`Parse`][structattn.dependency.record.Parse] of its first segment.
        passages_b: per example, the parses of its second segment, or None for single-segment tasks.
        relation: word-level relation name (see `relations.RELATIONS`).
        **options: relation options (``m``, ``k``).
    """
    flat, owner = [], []
    for ex, passage in enumerate(passages_a):
        for p in passage:
            flat.append(p)
            owner.append((ex, 0))
    if passages_b is not None:
        if len(passages_b) != len(passages_a):
            raise ValueError(f"{len(passages_a)} first segments but {len(passages_b)} second segments")
        for ex, passage in enumerate(passages_b):
            for p in passage:
                flat.append(p)
                owner.append((ex, 1))
    masks = batch_word_masks(flat, relation, **options)
    per_example: list[tuple[list, list, list, list]] = [([], [], [], []) for _ in passages_a]
    # Segment 0 sentences were appended before segment 1, so order is reading order.
    for p, mask, (ex, seg) in zip(flat, masks, owner):
        blocks, segs, punct, parents = per_example[ex]
        offset = len(punct)
        blocks.append(mask)
        segs.append(seg)
        punct.extend(u == "PUNCT" for u in p.upos) if p.upos else punct.extend([False] * len(p))
        parents.extend(h - 1 + offset if h > 0 else -1 for h in p.heads)
    return [WordStructure(b, s, np.asarray(pn, dtype=bool), np.asarray(par, dtype=np.int64))
            for b, s, pn, par in per_example]
