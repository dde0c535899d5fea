"""Probing a frozen translation encoder (Xu et al. 2019, section 5.1; Conneau et al. 2018's protocol).

The sentence vector is the mean of the last encoder layer over the sentence's pieces (``</s>`` included, padding
excluded), computed once with the encoder frozen; a one-hidden-layer MLP (50 units, ReLU, dropout 0.1, Adam 1e-3,
batches of 64) is trained on it, early-stopped on dev accuracy (patience 5 epochs, at most 100), and its test
accuracy at the best dev epoch is reported. Features are standardised with the training split's mean and std.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ..train.engine import Engine, EngineState, Evaluation, Family


@torch.no_grad()
def sentence_vectors(translator, texts: Sequence[str], max_tokens: int = 4096) -> np.ndarray:
    """[N, d] float32: mean of the last encoder layer over each text's pieces (the encoder in eval mode)."""
    from .data import TranslationCollator, build_source_structure, token_batches

    model, tokenizer = translator.model.eval(), translator.tokenizer
    ids = translator.encode(texts)
    structure = None
    if translator.needs_structure:
        from ..models.encoder import mechanism_of

        mech = mechanism_of(model)
        structure = build_source_structure(tokenizer, texts, mech.relation, translator.parser_name,
                                           **mech.relation_options())
    collate = TranslationCollator(tokenizer.pad_token_id)
    lengths = [len(x) for x in ids]
    out = np.zeros((len(texts), model.config.d_model), dtype=np.float32)
    for batch_idx in token_batches(lengths, lengths, max_tokens, seed=None):
        batch = collate([ids[i] for i in batch_idx], None, structure, batch_idx if structure is not None else None)
        hidden = model.get_encoder()(**batch).last_hidden_state  # [b, S, d]
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * mask).sum(1) / mask.sum(1)
        out[batch_idx] = mean.float().numpy()
    return out


@dataclass
class ProbeConfig:
    """The probe's training settings (module docstring)."""

    seed: int = 0
    hidden: int = 50
    max_epochs: int = 100
    patience: int = 5
    batch_size: int = 64
    lr: float = 1e-3


class ProbeFamily(Family):
    """The probe's training as an engine family: standardised sentence vectors, the MLP, cross-entropy over
    batches, dev accuracy once per epoch and the test accuracy of the best epoch.

    The batch order of epoch e is the (e+1)-th permutation of one generator seeded with ``seed`` (the order the
    recorded probing results were computed with), not `epoch_seed`'s: a probe never resumes.
    """

    main_metric = "dev_accuracy"
    report_evaluations = False  # up to ``max_epochs`` evaluations per task: the command prints each task's result

    def __init__(self, splits: list, classes: Sequence[str], config: ProbeConfig):
        self.splits, self.classes, self.config = splits, list(classes), config
        self.test_accuracy, self.best_epoch = 0.0, -1

    def load_data(self) -> None:
        """Labels as class indices; features standardised with the training split's mean and std."""
        (x_train, y_train), *_ = self.splits
        index = {c: i for i, c in enumerate(self.classes)}
        self.ys = [torch.tensor([index[y] for y in ys], dtype=torch.long) for _, ys in self.splits]
        mean, std = x_train.mean(0), x_train.std(0) + 1e-6
        self.xs = [torch.from_numpy((x - mean) / std).float() for x, _ in self.splits]
        self.generator = torch.Generator().manual_seed(self.config.seed)

    def build_model(self) -> torch.nn.Module:
        self.engine.seed()
        hidden = self.config.hidden
        self.model = torch.nn.Sequential(torch.nn.Linear(self.xs[0].shape[1], hidden), torch.nn.ReLU(),
                                         torch.nn.Dropout(0.1), torch.nn.Linear(hidden, len(self.classes)))
        return self.model

    def build_optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.config.lr)

    def updates(self) -> tuple[int, int]:
        steps_per_epoch = self.engine.steps_per_epoch(math.ceil(len(self.ys[0]) / self.config.batch_size))
        return self.config.max_epochs * steps_per_epoch, steps_per_epoch

    def epoch_batches(self, epoch: int) -> list:
        order = torch.randperm(len(self.ys[0]), generator=self.generator)  # called once per epoch, in order
        size = self.config.batch_size
        return [order[start:start + size] for start in range(0, len(order), size)]

    def batch_loss(self, batch) -> tuple[torch.Tensor, float]:
        return torch.nn.functional.cross_entropy(self.model(self.xs[0][batch]), self.ys[0][batch]), 1

    def predict(self, inputs) -> list:
        """Class indices of the standardised vectors ``inputs`` ([N, d] tensor)."""
        self.model.eval()
        with torch.no_grad():
            return self.model(inputs).argmax(-1).tolist()

    def _accuracy(self, split: int) -> float:
        return float((torch.tensor(self.predict(self.xs[split])) == self.ys[split]).float().mean())

    def evaluate_dev(self, state: EngineState, end_of_epoch: bool) -> Evaluation:
        return Evaluation({"epoch": state.epoch, "dev_accuracy": self._accuracy(1)})

    def on_best(self, entry: dict) -> None:
        self.test_accuracy, self.best_epoch = self._accuracy(2), entry["epoch"]

    def summary(self, state: EngineState) -> dict:
        return {"dev_accuracy": 100 * state.best, "test_accuracy": 100 * self.test_accuracy,
                "best_epoch": self.best_epoch}


def train_probe(x_train: np.ndarray, y_train: Sequence[str], x_dev: np.ndarray, y_dev: Sequence[str],
                x_test: np.ndarray, y_test: Sequence[str], classes: Sequence[str], seed: int = 0, hidden: int = 50,
                max_epochs: int = 100, patience: int = 5, batch_size: int = 64, lr: float = 1e-3) -> dict:
    """Train the MLP probe on the engine (`ProbeFamily`, in a temporary folder: nothing is kept);
    ``{"dev_accuracy", "test_accuracy", "best_epoch", "majority_test_accuracy"}``."""
    import tempfile

    family = ProbeFamily([(x_train, y_train), (x_dev, y_dev), (x_test, y_test)], classes,
                         ProbeConfig(seed, hidden, max_epochs, patience, batch_size, lr))
    with tempfile.TemporaryDirectory(prefix="structattn-probe-") as folder:
        engine = Engine(folder, seed=seed, checkpoints=False, show_progress=False, name="probe")
        result = engine.train(family)
    majority = max(set(y_train), key=list(y_train).count)
    return {**result, "majority_test_accuracy": 100 * float(np.mean([y == majority for y in y_test]))}


def probe_model(translator, tasks, seed: int = 0, progress=None) -> dict:
    """Every task of ``tasks`` (`ProbingTask`) on one model: {task: result}."""
    results = {}
    for task in tasks:
        vectors = {split: sentence_vectors(translator, task.texts[split]) for split in ("train", "dev", "test")}
        results[task.name] = {**train_probe(vectors["train"], task.labels["train"], vectors["dev"], task.labels["dev"],
                                            vectors["test"], task.labels["test"], task.classes, seed=seed),
                              "classes": len(task.classes),
                              "sizes": {s: len(task.texts[s]) for s in ("train", "dev", "test")}}
        if progress is not None:
            progress(task.name, results[task.name])
    return results
