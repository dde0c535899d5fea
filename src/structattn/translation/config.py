"""What decides a translation run: `NMTConfig`, its presets and the names of its choices. Kept apart from
the trainer (and torch) so that the command line builds its flags without importing either."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config_io import JsonConfig

#: ``--lr-decay``: the schedules after the warm-up (their functions: ``trainer.LR_DECAYS``).
LR_DECAY_NAMES = ("inverse_sqrt", "linear")

#: ``--batching``: how an epoch's training batches are drawn (their functions: ``data.TRAINING_BATCHES``).
BATCHINGS = ("length", "shuffled")


@dataclass
class NMTConfig(JsonConfig):
    """One translation run. Mechanism options (``layers``, ``k``, ``gate``) override the variant's."""

    output_dir: str = "runs/nmt/run"
    variant: str = "transformer"
    size: str = "tiny"
    seed: int = 42
    data_dir: str | None = None  # the folder that holds multi30k/ (default: the data folder)
    train_source: str | None = None  # own parallel files instead of Multi30k (train and dev pairs needed,
    train_target: str | None = None  # a test pair optional)
    dev_source: str | None = None
    dev_target: str | None = None
    test_source: str | None = None
    test_target: str | None = None
    test_splits: list[str] = field(default_factory=lambda: ["test2016", "test2017", "test2018", "mscoco2017"])
    max_train_examples: int = 0  # 0 = all
    vocab_size: int = 8000
    max_length: int = 100  # training pairs with more sub-words on a side are dropped (counted)
    max_tokens: int = 4096
    learning_rate: float = 5e-3  # the Multi30k Transformer-tiny recipe (with 2,000 warm-up and 8,000 updates)
    warmup: int = 2000
    lr_decay: str = "inverse_sqrt"  # after the warm-up: inverse_sqrt (sqrt(warmup / step)) | linear (to 0 at max_updates)
    max_updates: int = 8000
    label_smoothing: float = 0.1
    clip_norm: float = 0.0  # 0 = no clipping
    adam_eps: float = 1e-9  # Adam's epsilon (Joey NMT and torch: 1e-8)
    init: str = "fairseq"  # fresh weights: fairseq (Xavier-uniform matrices, N(0, d^-1/2) embeddings) | xavier_normal | deepnet
    residual: str = "plain"  # residual connections: plain, or deepnet (each branch weighted as Joey NMT's xavier_normal)
    batching: str = "length"  # length (pairs sorted by length, then packed) | shuffled (packed in a random order)
    embedding_dropout: float | None = None  # dropout on word + position embeddings; none = the size's dropout
    attention_dropout: float = 0.0  # dropout on the attention probabilities
    activation_dropout: float = 0.0  # dropout after the feed-forward ReLU
    eval_every: int = 500
    eval_beam: int = 1
    patience: int = 6
    average_last: int = 5
    beam: int = 5
    length_penalty: float = 1.0
    layers: int | None = None  # mechanism layers (default: the variant's, the lowest 2)
    k: int | None = None  # window half-width m of Xu et al. (local / hybrid variants)
    gate: str | None = None  # "token" or "head" (hybrid_gate, sla)
    precision: str = "fp32"  # fp32 | bf16 (autocast; CPUs with avx512_bf16/AMX, GPUs) | fp16 (CUDA only, loss scaling)
    threads: int = 0  # torch threads (0 = torch's default)
    checkpoint_every: int = 0  # also checkpoint every N updates; 0 = whenever 5 minutes passed since the last one

    def mechanism_options(self) -> dict[str, Any]:
        return {k: v for k, v in (("layers", self.layers), ("k", self.k), ("gate", self.gate)) if v is not None}

    def model_options(self) -> dict[str, Any]:
        """What [`build_model`][structattn.translation.model.build_model] takes besides the size and variant."""
        return {"init": self.init, "residual": self.residual, "embedding_dropout": self.embedding_dropout,
                "attention_dropout": self.attention_dropout, "activation_dropout": self.activation_dropout,
                **self.mechanism_options()}


#: ``structattn train-translation --preset NAME``; the command line's default is "laptop": 800 updates, the peak
#: learning rate at update 400 and then down linearly to 0, a dev evaluation every 200, about half an hour on one core
#: of a 2-core CPU (README), with DeepNet's residual weights, which learn faster in 800 updates (test2016 BLEU 27.03
#: against 20.27 with plain residuals, one seed). Against ``--warmup-steps 800 --lr-decay inverse_sqrt``, the linear
#: schedule gives dev greedy BLEU at update 800 of 24.85 / 25.08 against 24.60 / 24.04 and test2016 BLEU of
#: 27.00 / 27.86 against 27.03 / 26.35 (two seeds; results/PEERS.md, "Why our recipe learns more slowly").
#: "full" is this class's own defaults, the Multi30k recipe at full length (8,000 updates, 2,000 warm-up; hours
#: on a CPU; experiments/recipes/nmt.toml stops at 4,000).
NMT_PRESETS: dict[str, dict[str, Any]] = {
    "laptop": {"max_updates": 800, "warmup": 400, "lr_decay": "linear", "eval_every": 200, "average_last": 2,
               "residual": "deepnet"},
    "full": {},
}
