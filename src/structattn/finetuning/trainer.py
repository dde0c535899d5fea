"""The SLA/WLA/LISA family of sentence and token tasks: a transformers task model with the configured mechanism,
fine-tuned over the core's [`EncoderFamily`][structattn.train.encoder_family.EncoderFamily] (features, batches,
prediction, dev metric, summary; the engine is built when training starts), plus LISA's parent supervision: its
targets in the features and batches, its loss added to the model's, and in evaluations how often its head finds the
parents (``lisa_parent_accuracy``).
"""
from __future__ import annotations

from contextlib import nullcontext

import torch

from ..train.config import TrainConfig
from ..train.encoder_family import EncoderFamily
from .config import FinetuneConfig
from .features import add_parent_targets
from .model_loading import load_model_and_tokenizer


class Trainer(EncoderFamily):
    """Fine-tunes one SLA/WLA/LISA configuration of a sentence or token task (module docstring)."""

    prediction_drop = ("labels", "parent_targets")
    config_class = FinetuneConfig

    def __init__(self, cfg: TrainConfig, **kwargs):
        """``cfg``: a [`FinetuneConfig`][structattn.finetuning.config.FinetuneConfig] (a core `TrainConfig` runs
        without LISA)."""
        super().__init__(cfg, **kwargs)
        if self.cfg.lisa_weight > 0:
            from .lisa import LisaSupervision
            self.lisa = LisaSupervision(self.model)
        else:
            self.lisa = None

    @property
    def needs_parents(self) -> bool:
        return self.cfg.lisa_weight > 0

    def _summary(self, state) -> dict:
        return {**super()._summary(state), "lisa_weight": self.cfg.lisa_weight}

    def _load_model(self):
        """The model to train and its tokenizer: a transformers task model."""
        return load_model_and_tokenizer(self.cfg, self.task)

    def features(self, split: str, limit: int = 0, training: bool = False):
        examples, feats = super().features(split, limit, training)
        if self.needs_parents:
            add_parent_targets(feats)
        return examples, feats

    def collator(self):
        base = self.structure_collator()

        def collate(feats):
            batch = base(feats)
            if self.lisa is not None:
                T = batch["input_ids"].shape[1]
                tgt = torch.full((len(feats), T), -100, dtype=torch.long)
                for b, f in enumerate(feats):
                    tgt[b, :len(f["parent_targets"])] = torch.as_tensor(f["parent_targets"])
                batch["parent_targets"] = tgt
            return batch
        return collate

    def _evaluation_capture(self, batch: dict, dropped: dict, gate_stats: dict | None):
        # During training evaluations, also measure how well the LISA head finds the parents.
        parents = dropped["parent_targets"]
        if gate_stats is not None and self.lisa is not None and parents is not None:
            return self.lisa.capture(parents, batch["attention_mask"], count_hits=True)
        return nullcontext()

    def _add_evaluation_stats(self, gate_stats: dict) -> None:
        if self.lisa is not None:
            hits = self.lisa.parent_accuracy()
            if hits is not None:
                gate_stats["lisa_parent_accuracy"] = round(hits, 5)

    def _loss(self, batch) -> torch.Tensor:
        if self.lisa is None:
            return super()._loss(batch)
        with self.lisa.capture(batch.pop("parent_targets", None), batch["attention_mask"]):
            out = self.model(**batch)
        return out.loss + self.cfg.lisa_weight * self.lisa.loss()
