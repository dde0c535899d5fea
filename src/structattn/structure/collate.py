"""Batching: pad encoded windows and build their ``[batch, T, T]`` structure masks.

Masks are built per batch from the compact word-level blocks of each example
([`WordStructure`][structattn.structure.example.WordStructure]); nothing dense is cached.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from .expand import PAD, ExpansionRules, token_mask


class StructureCollator:
    """Collate features into padded tensors plus ``structure_mask``.

    Each feature is a dict with ``input_ids``, ``attention_mask`` (lists, length T_i),
    optionally ``token_type_ids``, ``token_word`` (``[T_i]`` ints), ``structure``
    ([`WordStructure`][structattn.structure.example.WordStructure]; unused, and may be None, when ``rules.token_window``
    is set: the mask is then the band over the T padded positions) and any label fields (``labels`` scalar
    or per-token list, padded with ``label_pad``).

    Output: ``input_ids`` / ``attention_mask`` / ``token_type_ids`` ``[B, T]`` long,
    ``structure_mask`` ``[B, T, T]`` bool, ``labels`` ``[B]`` or ``[B, T]``.
    """

    def __init__(self, pad_token_id: int, rules: ExpansionRules | None = None, *,
                 with_structure: bool = True, label_pad: int = -100, pad_to_multiple_of: int | None = None):
        self.pad_token_id = pad_token_id
        self.rules = rules or ExpansionRules()
        self.with_structure = with_structure
        self.label_pad = label_pad
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        T = padded_length(features, self.pad_to_multiple_of)
        batch = pad_inputs(features, T, self.pad_token_id, self.label_pad)
        if self.with_structure:
            masks = np.empty((len(features), T, T), dtype=bool)
            for b, f in enumerate(features):
                tw = np.full(T, PAD, dtype=np.int64)
                tw[:len(f["token_word"])] = f["token_word"]
                masks[b] = token_mask(f["structure"], tw, self.rules)
            batch["structure_mask"] = torch.from_numpy(masks)
        return batch


def padded_length(features: Sequence[dict[str, Any]], multiple_of: int | None = None) -> int:
    """The longest ``input_ids`` of the batch, rounded up to a multiple of ``multiple_of``."""
    T = max(len(f["input_ids"]) for f in features)
    return -(-T // multiple_of) * multiple_of if multiple_of else T


def pad_inputs(features: Sequence[dict[str, Any]], T: int, pad_token_id: int, label_pad: int = -100
               ) -> dict[str, torch.Tensor]:
    """``input_ids`` / ``attention_mask`` / ``token_type_ids`` (where the features have them) padded to ``[B, T]``
    long, and ``labels`` (where present): ``[B]`` long for class ids, ``[B]`` float for scores, ``[B, T]`` long
    for per-token ids padded with ``label_pad``."""
    B = len(features)
    ids = torch.full((B, T), pad_token_id, dtype=torch.long)
    att = torch.zeros((B, T), dtype=torch.long)
    has_types = features[0].get("token_type_ids") is not None
    types = torch.zeros((B, T), dtype=torch.long) if has_types else None
    for b, f in enumerate(features):
        n = len(f["input_ids"])
        ids[b, :n] = torch.as_tensor(f["input_ids"])
        att[b, :n] = torch.as_tensor(f["attention_mask"])
        if has_types:
            types[b, :n] = torch.as_tensor(f["token_type_ids"])
    batch = {"input_ids": ids, "attention_mask": att}
    if has_types:
        batch["token_type_ids"] = types
    if "labels" in features[0] and features[0]["labels"] is not None:
        batch["labels"] = _labels([f["labels"] for f in features], T, label_pad)
    return batch


def _labels(labels: list, T: int, label_pad: int) -> torch.Tensor:
    if isinstance(labels[0], (list, tuple, np.ndarray)) or (torch.is_tensor(labels[0]) and labels[0].dim()):
        out = torch.full((len(labels), T), label_pad, dtype=torch.long)
        for b, lab in enumerate(labels):
            out[b, :len(lab)] = torch.as_tensor(lab, dtype=torch.long)
        return out
    if isinstance(labels[0], (float, np.floating)) or (torch.is_tensor(labels[0]) and labels[0].is_floating_point()):
        return torch.tensor([float(x) for x in labels], dtype=torch.float32)
    return torch.tensor([int(x) for x in labels], dtype=torch.long)
