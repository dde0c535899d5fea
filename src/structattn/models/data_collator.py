"""Batches for ``transformers.Trainer`` (and any DataLoader) from
[`StructureProcessor`][structattn.models.processor.StructureProcessor] output.

    collator = structattn.StructureDataCollator(processor)
    trainer = Trainer(model, TrainingArguments("out"), train_dataset=ds, data_collator=collator)

Pads ``input_ids`` (with the tokenizer's pad id), ``attention_mask``, ``token_type_ids`` and the labels, and each
example's ``structure_mask`` [T_i, T_i] to [T, T] exactly as the processor's own padding does (real rows never see
padding; a padded row sees the real tokens). A structure-aware model's ``forward`` lists ``structure_mask``, so the
Trainer's default ``remove_unused_columns=True`` keeps it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ..errors import UserError
from ..structure.collate import pad_inputs, padded_length
from ..structure.expand import pad_token_mask


class StructureDataCollator:
    """Collate processor features into ``[B, T]`` long tensors and ``structure_mask`` ``[B, T, T]`` bool.

    Args:
        processor: the [`StructureProcessor`][structattn.models.processor.StructureProcessor] (or a tokenizer: only
            its pad id is read).
        pad_to_multiple_of: round T up to a multiple of this.
        label_pad: the value of padded per-token labels (-100: ignored by the loss).
        length: pad to exactly this T (``padding="max_length"``) instead of the longest example.

    Features are dicts with ``input_ids``, ``attention_mask``, ``structure_mask`` (``[T_i, T_i]``: nested lists,
    a numpy array or a tensor), optionally ``token_type_ids`` and ``labels`` / ``label`` (class id, float, or a
    per-token list).
    """

    def __init__(self, processor, pad_to_multiple_of: int | None = None, label_pad: int = -100,
                 length: int | None = None):
        tokenizer = getattr(processor, "tokenizer", processor)
        if tokenizer.pad_token_id is None:
            raise UserError(f"the tokenizer {type(tokenizer).__name__} has no pad token: set tokenizer.pad_token")
        self.pad_token_id = int(tokenizer.pad_token_id)
        self.pad_to_multiple_of = pad_to_multiple_of
        self.label_pad = label_pad
        self.length = length

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if not features:
            raise UserError("StructureDataCollator got an empty batch")
        missing = [k for k in ("input_ids", "attention_mask", "structure_mask") if k not in features[0]]
        if missing:
            raise UserError(f"the features lack {', '.join(missing)}: build them with structattn.StructureProcessor "
                            f"(they hold {', '.join(sorted(features[0]))})")
        features = [_with_labels_key(f) for f in features]
        T = self.length or padded_length(features, self.pad_to_multiple_of)
        batch = pad_inputs(features, T, self.pad_token_id, self.label_pad)
        masks = np.empty((len(features), T, T), dtype=bool)
        for b, f in enumerate(features):
            mask = _as_bool_array(f["structure_mask"])
            if mask.shape != (len(f["input_ids"]),) * 2:
                raise UserError(f"example {b}: structure_mask is {mask.shape} for {len(f['input_ids'])} tokens; "
                                "build input_ids and structure_mask in one processor call")
            masks[b] = pad_token_mask(mask, T)
        batch["structure_mask"] = torch.from_numpy(masks)
        return batch


def _with_labels_key(feature: dict) -> dict:
    """``label`` (the datasets convention) read as ``labels`` (what models take)."""
    if "labels" not in feature and "label" in feature:
        feature = {**feature, "labels": feature["label"]}
    return feature


def _as_bool_array(mask) -> np.ndarray:
    if torch.is_tensor(mask):
        return mask.numpy().astype(bool, copy=False)
    return np.asarray(mask, dtype=bool)
