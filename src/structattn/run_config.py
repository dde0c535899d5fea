"""The configuration of a fine-tuning run of any encoder system, as the command line, sweeps and reports know it:
the core's [`TrainConfig`][structattn.train.config.TrainConfig] fields and every system's own options
(`structattn.finetuning.config`, `structattn.sgnet.config`), one flag each. A run's key
([`config_key`][structattn.train.config.config_key]) hashes all of them, so that a results line keys the same
whichever system trained it; the trainer a task runs on (`structattn.trainers`) receives its own system's
configuration ([`narrowed`][structattn.train.config.narrowed]), which is what its ``train_config.json`` records."""
from __future__ import annotations

from dataclasses import dataclass

from .finetuning.config import LisaOptions
from .sgnet.config import SGNetOptions
from .train.config import TrainConfig


@dataclass
class RunConfig(SGNetOptions, LisaOptions, TrainConfig):
    """Every option of a fine-tuning run of an encoder: the core's, LISA's, SG-Net's (module docstring)."""

    SYSTEM = "a fine-tuning run of an encoder"
