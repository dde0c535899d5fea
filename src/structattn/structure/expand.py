"""Expanding word-level relations to a sub-word token mask.

Notation: N words in the example, T tokens in one encoded window. ``token_word``
(``[T]`` int) maps each token to its global word index, ``-1`` for special
tokens ([CLS], [SEP], <s>, </s>) and ``-2`` for padding.

The result is a ``[T, T]`` bool mask (row = query token, True = may attend).
All sub-words of a word share its row and column. No row is ever all False.

The one exception is a window over token positions (``ExpansionRules.token_window``, a mechanism's
``window_unit="token"``): there the mask is the band |t - u| <= k over the T positions, words ignored,
exactly the band the attention function builds when a model is called without ``structure_mask``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .example import WordStructure
from .relations import band

SPECIAL = -1
PAD = -2


@dataclass(frozen=True)
class ExpansionRules:
    """How tokens outside the word relation are treated.

    Attributes:
        special_rows: ``"all"`` – special tokens see every real token (SLA: they are never masked);
            ``"self"`` – they see only themselves (SG-Net's rule).
        special_cols: ``"visible"`` – every token may attend special tokens (SLA);
            ``"hidden"`` – only special tokens themselves do (SG-Net).
        cross_segment: ``"all"`` – every token may attend all tokens of the other
            segment (the SLA paper's rule for pairs); ``"none"`` – no cross-segment links (block rule).
        cross_sentence: ``"none"`` – relations stay inside each sentence of a passage;
            ``"all"`` – words of different sentences of the same segment see each other.
        punct_visible: the official SLA code makes punctuation columns visible to every
            token; off by default (not in the paper).
        token_window: None, or k for a window over token positions (``window_unit="token"``):
            [`token_mask`][structattn.structure.expand.token_mask] then gives the band |t - u| <= k over all T
            positions, special tokens and padding included (the model's padding mask hides padded keys), and the word
            relation and the rules above are not used.
    """

    special_rows: str = "all"
    special_cols: str = "visible"
    cross_segment: str = "all"
    cross_sentence: str = "none"
    punct_visible: bool = False
    token_window: int | None = None

    _CHOICES = {"special_rows": ("all", "self"), "special_cols": ("visible", "hidden"),
                "cross_segment": ("all", "none"), "cross_sentence": ("none", "all")}

    def __post_init__(self):
        for name, valid in self._CHOICES.items():
            value = getattr(self, name)
            if value not in valid:
                raise ValueError(f"{name}={value!r} is not valid; choose one of {', '.join(valid)}")
        k = self.token_window
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0):
            raise ValueError(f"token_window must be None or a non-negative integer, got {k!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def for_relation(cls, relation: str, **overrides) -> "ExpansionRules":
        """Default rules per relation (SG-Net's for ``sdoi``, SLA's otherwise), with overrides."""
        base = dict(special_rows="self", special_cols="hidden", cross_segment="none") if relation == "sdoi" else {}
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)


def example_word_mask(structure: WordStructure, rules: ExpansionRules) -> np.ndarray:
    """The example's full word-level mask ``[N, N]`` bool from its per-sentence blocks."""
    n_total = structure.num_words
    mask = np.zeros((n_total, n_total), dtype=bool)
    seg = structure.segment_of_word()
    if rules.cross_sentence == "all":
        mask |= seg[:, None] == seg[None, :]
    if rules.cross_segment == "all":
        mask |= seg[:, None] != seg[None, :]
    start = 0
    for block in structure.blocks:
        n = block.shape[0]
        mask[start:start + n, start:start + n] = block
        start += n
    if rules.punct_visible and structure.punct.size:
        mask |= structure.punct[None, :]
    return mask


def expand_to_tokens(word_mask: np.ndarray, token_word: np.ndarray, rules: ExpansionRules) -> np.ndarray:
    """Token mask ``[T, T]`` bool from the example's word mask.

    Args:
        word_mask: ``[N, N]`` bool, from [`example_word_mask`][structattn.structure.expand.example_word_mask].
        token_word: ``[T]`` int, global word index per token, ``SPECIAL`` (-1) or ``PAD`` (-2).
        rules: special-token rules.
    """
    token_word = np.asarray(token_word)
    is_word = token_word >= 0
    is_special = token_word == SPECIAL
    is_real = token_word != PAD
    idx = np.where(is_word, token_word, 0)
    mask = word_mask[idx[:, None], idx[None, :]] & is_word[:, None] & is_word[None, :]
    if rules.special_cols == "visible":
        mask |= is_real[:, None] & is_special[None, :]
    if rules.special_rows == "all":
        mask |= is_special[:, None] & is_real[None, :]
    # Every real token sees itself (specials under "self", and any word whatever the relation).
    diag = np.arange(len(token_word))
    mask[diag, diag] |= is_real
    # Padding queries behave like global attention over the real tokens; their outputs are
    # ignored, but their rows must not be empty.
    pad = ~is_real
    if pad.any():
        mask[pad] = is_real[None, :] if is_real.any() else True
        if not is_real.any():
            mask[:] = True
    return mask


def pad_token_mask(mask: np.ndarray, T: int) -> np.ndarray:
    """A window's ``[n, n]`` bool token mask padded to ``[T, T]`` (T >= n) exactly as
    [`expand_to_tokens`][structattn.structure.expand.expand_to_tokens] treats padding: real rows never see padded
    columns; a padded row sees every real token."""
    n = mask.shape[0]
    out = np.zeros((T, T), dtype=bool)
    out[:n, :n] = mask
    out[n:, :n] = True
    if n == 0:
        out[:] = True
    return out


def token_mask(structure: WordStructure | None, token_word: np.ndarray, rules: ExpansionRules) -> np.ndarray:
    """``[T, T]`` bool token mask for one encoded window of an example (T = ``len(token_word)``).

    With ``rules.token_window`` set the mask is the band over token positions and ``structure`` may be None.
    """
    if rules.token_window is not None:
        return band(len(token_word), len(token_word), rules.token_window)
    return expand_to_tokens(example_word_mask(structure, rules), token_word, rules)
