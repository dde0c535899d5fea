"""The fine-tuning trainer of sentence and token tasks (and, in `structattn.sgnet`'s subclasses, with the SG-Net
layer, QA and multiple choice).

The family part of [`structattn.train.engine`][structattn.train.engine]: the task's features, batches, loss (the model's
own, plus LISA's), dev metric and summary; the engine trains (one or many processes, ``accelerate launch``), evaluates,
checkpoints into ``<output_dir>/checkpoint/`` (no pickle) and resumes. The data order of epoch e is a
permutation seeded by (seed, e), so a resumed run sees exactly the batches the interrupted run would have seen.
AdamW (no decay on biases and norms), linear warm-up over ``warmup_ratio`` of the updates then linear decay,
gradients clipped to norm 1. At the end ``trainer_state.json`` holds the engine's state (step, best, history: per
evaluation the dev metrics and ``train_loss``, the mean training loss since the previous evaluation).
"""
from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Sampler

from ..tasks import get_task
from ..io import atomic_write_json
from ..train.checkpoint import AtomicDir
from ..train.config import TrainConfig
from ..train.engine import (Engine, EngineState, Evaluation, Family, adamw_without_decay_on_vectors, epoch_seed,
                            linear_schedule, seeded_batches, seeded_order)
from .features import StructureSpec, aggregate_predictions, build_features
from .model_loading import load_model_and_tokenizer

log = logging.getLogger(__name__)


class EpochPermutationSampler(Sampler[int]):
    """Shuffles with a permutation that depends only on (seed, epoch) (`seeded_order`)."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed, self.epoch = n, seed, 0
        self.lengths, self.batch_size, self.group_batches = None, 1, 50

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        return iter(seeded_order(self.n, epoch_seed(self.seed, self.epoch), self.lengths, self.batch_size,
                                 self.group_batches))

    def __len__(self) -> int:
        return self.n


class LengthGroupedSampler(EpochPermutationSampler):
    """A (seed, epoch) permutation in which each run of ``batch_size`` indices has similar lengths
    (`seeded_order` with lengths): less padding per batch, the same examples per epoch.

    lengths: [n] token count of every feature.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int, group_batches: int = 50):
        super().__init__(len(lengths), seed)
        self.lengths, self.batch_size, self.group_batches = list(lengths), batch_size, group_batches


def structure_spec_for(model, cfg: TrainConfig) -> StructureSpec:
    """The relation the model's installed mechanism needs (the model is the one source of truth)."""
    from ..models.encoder import mechanism_of

    return StructureSpec.for_mechanism(mechanism_of(model), need_parents=cfg.lisa_weight > 0)


def prediction_batches(model: torch.nn.Module, feats, collate, batch_size: int, device,
                       drop: tuple[str, ...] = ("labels",)):
    """The prediction loop of the fine-tuning families and the reader: ``model`` in eval mode, ``feats`` in chunks
    of ``batch_size``, each collated by ``collate``, its ``drop`` tensors (labels) taken out and the rest moved to
    ``device``. Yields ``(chunk, batch, dropped)`` (``dropped``: name -> tensor or None)."""
    model.eval()
    for start in range(0, len(feats), batch_size):
        chunk = feats[start:start + batch_size]
        batch = collate(chunk)
        dropped = {name: batch.pop(name, None) for name in drop}
        yield chunk, {k: v.to(device) for k, v in batch.items()}, dropped


class Trainer(Family):
    """Fine-tunes one configuration (the sentence-task family; see module docstring)."""

    config_file = "train_config.json"
    summary_on_every_process = True

    def __init__(self, cfg: TrainConfig, *, show_progress: bool = True):
        self.cfg = self.config = cfg
        self.show_progress = show_progress
        self.task = self._get_task(cfg.task)
        self.out = Path(cfg.output_dir)
        self.engine = Engine(cfg.output_dir, seed=cfg.seed, precision=cfg.precision, grad_accum=cfg.grad_accum,
                             clip_norm=1.0, checkpoint_every=cfg.checkpoint_every, checkpoints=cfg.save_checkpoints,
                             deterministic=cfg.deterministic, show_progress=show_progress,
                             name=f"{cfg.task} {cfg.mechanism}")
        self.accelerator = self.engine.acc
        self.engine.seed()
        self.model, self.tokenizer = self._load_model()
        self.structure = structure_spec_for(self.model, cfg)
        self.label_list = list(self.task.label_list) if getattr(self.task, "label_list", None) else None
        self.label_to_id = {lab: i for i, lab in enumerate(self.label_list)} if self.label_list else None
        if cfg.lisa_weight > 0:
            from .lisa import LisaSupervision
            self.lisa = LisaSupervision(self.model)
        else:
            self.lisa = None

    def _get_task(self, name: str):
        """The task the run trains on (a sentence or token task here; reading tasks in their trainers)."""
        return get_task(name)

    @property
    def main_metric(self) -> str:
        """The metric that picks the best checkpoint (greater is better)."""
        return self.task.main_metric

    def _load_model(self):
        """The model to train and its tokenizer: a transformers task model (with SG-Net's layer:
        `structattn.sgnet.sentence.SGNetSentenceTrainer`)."""
        return load_model_and_tokenizer(self.cfg, self.task)

    # ------------------------------------------------------------------ data
    def _preprocess_workers(self) -> int:
        """``--preprocess-workers`` (the reading families' feature builders), 0 = one per core this process may use
        (at most 16)."""
        if self.cfg.preprocess_workers > 0:
            return self.cfg.preprocess_workers
        import os

        return min(16, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

    def features(self, split: str, limit: int = 0, training: bool = False):
        examples = self.task.read(split)
        if limit:
            examples = examples[:limit]
        feats = build_features(self.task, examples, self.tokenizer, self.structure, max_length=self.cfg.max_length,
                               stride=self.cfg.stride, parser_name=self.cfg.parser, label_to_id=self.label_to_id,
                               long_inputs=self.cfg.long_inputs, training=training, split=split,
                               show_progress=self.show_progress and self.accelerator.is_main_process)
        return examples, feats

    def structure_collator(self):
        """Pads a batch of features and adds the mechanism's structure (the collator before LISA's targets)."""
        from ..structure import StructureCollator

        return StructureCollator(self.tokenizer.pad_token_id, self.structure.rules,
                                 with_structure=self.structure.relation is not None)

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

    @staticmethod
    def feature_length(feature: dict) -> int:
        """Tokens of a feature (of its longest option for multiple choice), for batching by length."""
        if "options" in feature:
            return max(len(option["input_ids"]) for option in feature["options"])
        return len(feature["input_ids"])

    # ------------------------------------------------------------------ evaluation
    def prediction_batches(self, feats, batch_size: int, drop: tuple[str, ...] = ("labels",)):
        """[`prediction_batches`][structattn.finetuning.trainer.prediction_batches] of this trainer's model, collator
        and device."""
        return prediction_batches(self.accelerator.unwrap_model(self.model), feats, self.collator(), batch_size,
                                  self.accelerator.device, drop)

    def predict(self, inputs) -> list:
        """Logits per feature ([`predict_logits`][structattn.finetuning.trainer.Trainer.predict_logits])."""
        return self.predict_logits(inputs)

    @torch.no_grad()
    def predict_logits(self, feats, gate_stats: dict | None = None) -> list[np.ndarray]:
        """Logits per window (``[T, C]`` for tagging, ``[C]`` otherwise).

        With ``gate_stats`` (a dict), the mean gate value of every mechanism layer over the real
        tokens is stored in it as ``{"gate_means": [per layer]}`` (the SLA paper's Figure 2).
        """
        from contextlib import nullcontext

        from ..attention.integration import record, runtime_of

        model = self.accelerator.unwrap_model(self.model)
        outs = []
        sums: dict[int, float] = {}
        counts: dict[int, float] = {}
        track = gate_stats is not None and runtime_of(model) is not None
        for chunk, batch, dropped in self.prediction_batches(feats, self.cfg.eval_batch_size,
                                                             ("labels", "parent_targets")):
            parents = dropped["parent_targets"]
            # During training evaluations, also measure how well the LISA head finds the parents.
            lisa = self.lisa.capture(parents, batch["attention_mask"], count_hits=True) \
                if gate_stats is not None and self.lisa is not None and parents is not None else nullcontext()
            with record(model) if track else nullcontext() as rec, lisa:
                logits = model(**batch).logits.float().cpu().numpy()
            if track:
                real = batch["attention_mask"].float()
                for layer, g in zip(rec.layers, rec.gates):
                    g = g.float().mean(1) if g.dim() == 3 else g.float()  # per-head gates: mean over heads
                    sums[layer] = sums.get(layer, 0.0) + float((g * real).sum())
                    counts[layer] = counts.get(layer, 0.0) + float(real.sum())
            for b, f in enumerate(chunk):
                n = len(f["input_ids"])
                outs.append(logits[b, :n] if logits.ndim == 3 else logits[b])
        if track:
            gate_stats["gate_means"] = [round(sums[k] / counts[k], 5) for k in sorted(sums)]
            gate_stats["gate_layers"] = sorted(sums)
        if gate_stats is not None and self.lisa is not None:
            hits = self.lisa.parent_accuracy()
            if hits is not None:
                gate_stats["lisa_parent_accuracy"] = round(hits, 5)
        return outs

    def evaluate(self, examples, feats, with_gates: bool = False) -> dict:
        """The task metric on ``examples`` (+ ``gate_means`` per layer when ``with_gates``)."""
        stats: dict = {}
        logits = self.predict_logits(feats, stats if with_gates else None)
        preds = aggregate_predictions(self.task, feats, logits, examples, self.label_list)
        metrics = self.task.metric(preds, [ex.label for ex in examples])
        return {**metrics, **stats}

    # ------------------------------------------------------------------ training (the Family hooks)
    def train(self) -> dict:
        """Train, evaluate and checkpoint through the engine; the summary (every process)."""
        return self.engine.train(self)

    def load_data(self) -> None:
        cfg = self.cfg
        _, self.train_feats = self.features("train", cfg.max_train_examples, training=True)
        self.eval_examples, self.eval_feats = self.features(cfg.eval_split, cfg.max_eval_examples)
        self.train_lengths = [self.feature_length(f) for f in self.train_feats] if cfg.group_by_length else None
        self.train_collate = self.collator()

    def build_model(self) -> torch.nn.Module:
        return self.model  # loaded (after seeding) when the trainer was made: evaluation and prediction need it

    def updates(self) -> tuple[int, int]:
        cfg = self.cfg
        steps_per_epoch = self.engine.steps_per_epoch(math.ceil(len(self.train_feats) / cfg.batch_size))
        return cfg.max_steps or int(math.ceil(steps_per_epoch * cfg.epochs)), cfg.eval_every or steps_per_epoch

    def build_optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        return adamw_without_decay_on_vectors(model, self.cfg.learning_rate, self.cfg.weight_decay)

    def schedule(self, total: int):
        warmup = int(self.cfg.warmup_ratio * total)
        return lambda step: linear_schedule(step, warmup, total)

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        cfg = self.cfg
        return seeded_batches(len(self.train_feats), cfg.batch_size, self.epoch_order_seed(cfg.seed, epoch),
                              self.train_lengths)

    def batch_loss(self, indices: list[int]):
        batch = self.train_collate([self.train_feats[i] for i in indices])
        return self._loss({k: v.to(self.engine.device) for k, v in batch.items()}), 1

    def evaluate_dev(self, state: EngineState, end_of_epoch: bool) -> Evaluation:
        engine = self.engine
        with engine.autocast():  # as the model trains (bf16/fp16); fp32: no autocast
            metrics = self.evaluate(self.eval_examples, self.eval_feats, with_gates=True)
        return Evaluation({"step": state.step, "epoch": state.epoch - end_of_epoch,
                           "elapsed_s": round(engine.elapsed(), 1), **metrics})

    def on_best(self, entry: dict) -> None:
        if self.cfg.keep_best_model and self.engine.is_main:
            self.save_model(self.out / "best", {k: v for k, v in entry.items()
                                                if k not in ("step", "epoch", "elapsed_s", "train_loss")})

    def on_evaluated(self, entry: dict) -> None:
        self._note_kernels(self.engine.state)

    def summary(self, state: EngineState) -> dict:
        self._note_kernels(state)
        if self.engine.is_main:
            atomic_write_json(self.out / "trainer_state.json", dataclasses.asdict(state))
        return self._summary(state)

    def _loss(self, batch) -> torch.Tensor:
        parent = batch.pop("parent_targets", None)
        if self.lisa is not None:
            with self.lisa.capture(parent, batch["attention_mask"]):
                out = self.model(**batch)
            return out.loss + self.cfg.lisa_weight * self.lisa.loss()
        return self.model(**batch).loss

    def _note_kernels(self, state: EngineState) -> None:
        """Add the kernels the model has run so far (``auto`` resolved) to ``state.extra["kernels"]``."""
        from ..train.provenance import kernels_used

        state.extra["kernels"] = sorted(set(state.extra.get("kernels", [])) | set(kernels_used(self.model)))

    def save_model(self, folder: Path, metrics: dict) -> None:
        from ..train.checkpoint import save_pretrained_atomically

        def run_files(tmp: Path) -> None:
            self.cfg.save(tmp / "train_config.json")
            atomic_write_json(tmp / "metrics.json", metrics)

        save_pretrained_atomically(folder, self.accelerator.unwrap_model(self.model), self.tokenizer, then=run_files)

    def _summary(self, state: EngineState) -> dict:
        best = next((h for h in state.history if h["step"] == state.best_step), {})
        return {"task": self.cfg.task, "mechanism": self.cfg.mechanism, "m": self.cfg.m, "k": self.cfg.k,
                "lisa_weight": self.cfg.lisa_weight, "seed": self.cfg.seed, "learning_rate": self.cfg.learning_rate,
                "epochs": self.cfg.epochs, "model": self.cfg.model or "all-MiniLM-L6-v2",
                "main_metric": self.main_metric, "best": state.best, "best_step": state.best_step,
                "best_metrics": {k: v for k, v in best.items() if k not in ("step", "epoch", "elapsed_s")},
                "steps": state.step, "history": state.history, **self._provenance(state)}

    def _provenance(self, state: EngineState) -> dict:
        """Package version, git commit and the kernel(s) that ran (recorded in the state, so a finished
        run that is asked again still reports what ran when it trained)."""
        from ..train.provenance import provenance

        self._note_kernels(state)
        return {**provenance(), "kernel": "+".join(state.extra.get("kernels", [])) or None}

