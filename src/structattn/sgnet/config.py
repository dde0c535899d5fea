"""SG-Net's own run options (the SG layer, the parts of a saved folder a run takes, span QA's answer search) and
its configuration: the core's [`TrainConfig`][structattn.train.config.TrainConfig] with them."""
from __future__ import annotations

from dataclasses import dataclass

from ..train.config import TrainConfig


@dataclass
class SGNetOptions:
    """What an SG-Net run (sentence tasks with the SG layer or a pooled head, span QA, multiple choice) adds to the
    core's fields."""

    model_parts: str = "all"  # --model a saved SG-Net/reader folder: all = as saved | encoder = its encoder only
    sgnet: str = "none"  # SG-Net layer on top of the encoder: none | dual | sg_only | vanilla | concat | biattention
    sgnet_alpha: float | None = 0.5  # dual aggregation weight of the encoder output; None = learned (official code)
    sgnet_init: str = "fresh"  # the SG layer's weights: fresh | copy (of the encoder's last layer)
    max_answer_length: int = 30  # span QA: longest answer, in words
    n_best: int = 20  # span QA: candidate answers kept per question (the n-best file)

    FIELD_HELP = {
        "model_parts": "what a saved SG-Net or reader folder given as --model lends this run: 'all' (go on "
                       "training it as saved; its --sgnet must match) or 'encoder' (its encoder only; the SG part "
                       "and the head start fresh, as the paper adds SG-Net to a pretrained encoder)",
    }
    #: what a saved folder's configuration takes when that folder itself is loaded (evaluation, prediction): all
    #: of it, whatever parts the run took from its own ``--model``
    SAVED_FOLDER_FIELDS = {"model_parts": "all"}


@dataclass
class SGNetTrainConfig(SGNetOptions, TrainConfig):
    """An SG-Net run: a syntax-guided layer (or only a pooled head) over the encoder."""

    SYSTEM = "SG-Net (a syntax-guided layer or a pooled head over the encoder)"
