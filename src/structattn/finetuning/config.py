"""The fine-tuning system's own run options (LISA's supervision weight) and its configuration: the core's
[`TrainConfig`][structattn.train.config.TrainConfig] with them."""
from __future__ import annotations

from dataclasses import dataclass

from ..train.config import TrainConfig


@dataclass
class LisaOptions:
    """What a fine-tuning run of a transformers task model adds to the core's fields."""

    lisa_weight: float = 0.0  # >0: LISA parent supervision on the last head of every layer


@dataclass
class FinetuneConfig(LisaOptions, TrainConfig):
    """A fine-tuning run of a transformers task model on a sentence or token task (SLA, WLA, LISA)."""

    SYSTEM = "the fine-tuning of a transformers task model (SLA, WLA, LISA)"
