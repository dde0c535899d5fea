"""LISA's targets on sentence-task features: per token, where its head word starts in the same window."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..structure import first_subword_positions
from ..train.features import IGNORE


def add_parent_targets(features: Sequence[dict]) -> None:
    """Give every feature built with a structure (`structattn.train.features.build_features` under a spec with
    ``need_parents``) its ``parent_targets`` (`parent_targets` of its window and its example's parse)."""
    for feat in features:
        if feat["structure"] is not None:
            feat["parent_targets"] = parent_targets(feat["token_word"], feat["structure"].parents)


def parent_targets(token_word: np.ndarray, parents: np.ndarray) -> list[int]:
    """Per token, the position of its head word's first sub-word in this window.

    Roots attend to themselves; non-first sub-words, special tokens and words whose head
    falls outside the window get -100 (no supervision).
    """
    token_word = np.asarray(token_word)
    first = first_subword_positions(token_word)
    pos_of_word = {int(token_word[t]): int(t) for t in np.nonzero(first)[0]}
    out = [IGNORE] * len(token_word)
    for t in np.nonzero(first)[0]:
        w = int(token_word[t])
        head = int(parents[w])
        target = t if head < 0 else pos_of_word.get(head)
        if target is not None:
            out[t] = int(target)
    return out
