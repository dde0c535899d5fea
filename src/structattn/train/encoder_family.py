"""What every family that fine-tunes a pretrained encoder shares (SLA/WLA/LISA in `structattn.finetuning`, SG-Net's
sentence, span-QA and multiple-choice families in `structattn.sgnet`), in two parts.

Inference: made on a [`TrainConfig`][structattn.train.config.TrainConfig], an
[`EncoderFamily`][structattn.train.encoder_family.EncoderFamily] loads its task, the model and tokenizer (from a name
or a saved folder), the structure the model's mechanism reads, and gives the task's features, the batches, the
prediction loop ([`prediction_batches`][structattn.train.encoder_family.prediction_batches]) and the task metric
(``evaluate``): what ``structattn evaluate`` / ``predict`` and the reader use. Nothing of training is built then:
no engine, no Accelerator, no output folder or its lock.

Training: [`train`][structattn.train.encoder_family.EncoderFamily.train] builds the
[`Engine`][structattn.train.engine.Engine] (processes, precision, the output folder's lock) and hands it the family:
the loss (the model's own), AdamW (no decay on biases and norms), linear warm-up over ``warmup_ratio`` of the
updates then linear decay, gradients clipped to norm 1, the dev metric, ``best/`` and the summary. The data order of
epoch e is a permutation seeded by (seed, e), so a resumed run sees exactly the batches the interrupted run would
have seen. At the end ``trainer_state.json`` holds the engine's state (step, best, history: per evaluation the dev
metrics and ``train_loss``, the mean training loss since the previous evaluation).

The sentence and token tasks' features and metric are this base's; the reading families replace `features`,
`collator`, `predict` and `evaluate`.
"""
from __future__ import annotations

import abc
import dataclasses
import math
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from ..io import atomic_write_json
from ..structure.spec import StructureSpec
from ..tasks import get_task
from .checkpoint import save_pretrained_atomically
from .config import TrainConfig, narrowed
from .engine import (Engine, EngineState, Evaluation, Family, adamw_without_decay_on_vectors, linear_schedule,
                     seed_run, seeded_batches)
from .features import aggregate_predictions, build_features


def structure_spec_for(model, need_parents: bool = False) -> StructureSpec:
    """The relation the model's installed mechanism needs (the model is the one source of truth); ``need_parents``:
    every example also gets its parse (LISA's targets)."""
    from ..models.encoder import mechanism_of

    return StructureSpec.for_mechanism(mechanism_of(model), need_parents=need_parents)


def inference_device() -> torch.device:
    """Where a saved model predicts: the one accelerator torch sees (a GPU), else the CPU."""
    return torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")


def prediction_batches(model: torch.nn.Module, feats, collate, batch_size: int, device,
                       drop: tuple[str, ...] = ("labels",)):
    """The prediction loop of the encoder families and the reader: ``model`` in eval mode, ``feats`` in chunks
    of ``batch_size``, each collated by ``collate``, its ``drop`` tensors (labels) taken out and the rest moved to
    ``device``. Yields ``(chunk, batch, dropped)`` (``dropped``: name -> tensor or None)."""
    model.eval()
    for start in range(0, len(feats), batch_size):
        chunk = feats[start:start + batch_size]
        batch = collate(chunk)
        dropped = {name: batch.pop(name, None) for name in drop}
        yield chunk, {k: v.to(device) for k, v in batch.items()}, dropped


def preprocess_workers(requested: int) -> int:
    """``--preprocess-workers`` (the reading families' feature builders): ``requested``, or with 0 one per core
    this process may use (at most 16)."""
    if requested > 0:
        return requested
    import os

    return min(16, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def feature_length(feature: dict) -> int:
    """Tokens of a feature (of its longest option for multiple choice), for batching by length."""
    if "options" in feature:
        return max(len(option["input_ids"]) for option in feature["options"])
    return len(feature["input_ids"])


class EncoderFamily(Family):
    """One configuration of an encoder fine-tuned on a task (module docstring): the inference part when made, the
    engine when `train` starts. ``device``: where the loaded model is put (`inference_device` for prediction;
    training moves it to the engine's device)."""

    config_file = "train_config.json"
    #: the configuration this family reads: `TrainConfig`, or one with its system's options (a config of another
    #: class given to it is `narrowed` to this one)
    config_class: type[TrainConfig] = TrainConfig
    summary_on_every_process = True
    #: what a prediction batch sets aside before the forward pass (the gold labels)
    prediction_drop: tuple[str, ...] = ("labels",)
    #: whether every example also needs its parse (LISA's targets)
    needs_parents: bool = False

    def __init__(self, cfg: TrainConfig, *, show_progress: bool = True, device: torch.device | str | None = None,
                 loaded: tuple | None = None):
        """``loaded``: ``(model, tokenizer)`` already loaded from ``cfg.model`` (the reader's), instead of
        `_load_model`."""
        cfg = narrowed(cfg, self.config_class)
        self.cfg = self.config = cfg
        self.show_progress = show_progress
        self.task = self._get_task(cfg.task)
        self.out = Path(cfg.output_dir)
        self.engine: Engine | None = None  # built by train()
        if loaded is None:
            seed_run(cfg.seed, cfg.deterministic)  # the parts a run starts fresh are initialised from its seed
            loaded = self._load_model()
        self.model, self.tokenizer = loaded
        self._device = torch.device(device) if device is not None else torch.device("cpu")
        self.model.to(self._device)
        self.structure = structure_spec_for(self.model, need_parents=self.needs_parents)
        self.label_list = list(self.task.label_list) if getattr(self.task, "label_list", None) else None
        self.label_to_id = {lab: i for i, lab in enumerate(self.label_list)} if self.label_list else None

    def _get_task(self, name: str):
        """The task of the configuration (a sentence or token task here; reading tasks in their families)."""
        return get_task(name)

    @abc.abstractmethod
    def _load_model(self):
        """``(model, tokenizer)`` of the configuration (``cfg.model``: a name or a saved folder)."""

    @property
    def main_metric(self) -> str:
        """The metric that picks the best checkpoint (greater is better)."""
        return self.task.main_metric

    @property
    def device(self) -> torch.device:
        """Where the model runs: the engine's device once training started, else where it was loaded."""
        return self.engine.device if self.engine is not None else self._device

    @property
    def is_main(self) -> bool:
        """Whether this is the process that prints and writes (the only one outside training)."""
        return self.engine is None or self.engine.is_main

    # ------------------------------------------------------------------ data
    def _preprocess_workers(self) -> int:
        return preprocess_workers(self.cfg.preprocess_workers)

    def features(self, split: str, limit: int = 0, training: bool = False):
        """``(examples, features)`` of a task split; ``limit`` keeps the first N examples."""
        examples = self.task.read(split)
        if limit:
            examples = examples[:limit]
        feats = build_features(self.task, examples, self.tokenizer, self.structure, max_length=self.cfg.max_length,
                               stride=self.cfg.stride, parser_name=self.cfg.parser, label_to_id=self.label_to_id,
                               long_inputs=self.cfg.long_inputs, training=training, split=split,
                               show_progress=self.show_progress and self.is_main)
        return examples, feats

    def structure_collator(self):
        """Pads a batch of features and adds the mechanism's structure."""
        from ..structure import StructureCollator

        return StructureCollator(self.tokenizer.pad_token_id, self.structure.rules,
                                 with_structure=self.structure.relation is not None)

    def collator(self):
        """The batches of this family's features."""
        return self.structure_collator()

    # ------------------------------------------------------------------ prediction and evaluation
    def prediction_batches(self, feats, batch_size: int, drop: tuple[str, ...] = ("labels",)):
        """[`prediction_batches`][structattn.train.encoder_family.prediction_batches] of this family's model,
        collator and device."""
        return prediction_batches(self.model, feats, self.collator(), batch_size, self.device, drop)

    def predict(self, inputs) -> list:
        """Logits per feature ([`predict_logits`][structattn.train.encoder_family.EncoderFamily.predict_logits])."""
        return self.predict_logits(inputs)

    def _evaluation_capture(self, batch: dict, dropped: dict, gate_stats: dict | None):
        """A context around one evaluation forward pass that measures something of the family's own (none here)."""
        return nullcontext()

    def _add_evaluation_stats(self, gate_stats: dict) -> None:
        """Add what `_evaluation_capture` measured to ``gate_stats`` (nothing here)."""

    @torch.no_grad()
    def predict_logits(self, feats, gate_stats: dict | None = None) -> list[np.ndarray]:
        """Logits per window (``[T, C]`` for tagging, ``[C]`` otherwise).

        With ``gate_stats`` (a dict), the mean gate value of every mechanism layer over the real
        tokens is stored in it as ``{"gate_means": [per layer]}`` (the SLA paper's Figure 2).
        """
        from ..attention.integration import record, runtime_of

        model = self.model
        outs = []
        sums: dict[int, float] = {}
        counts: dict[int, float] = {}
        track = gate_stats is not None and runtime_of(model) is not None
        for chunk, batch, dropped in self.prediction_batches(feats, self.cfg.eval_batch_size, self.prediction_drop):
            with record(model) if track else nullcontext() as rec, self._evaluation_capture(batch, dropped,
                                                                                             gate_stats):
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
        if gate_stats is not None:
            self._add_evaluation_stats(gate_stats)
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
        """Build the engine (processes, precision, the output folder's lock), then train, evaluate and checkpoint
        through it; the summary (every process)."""
        cfg = self.cfg
        self.engine = Engine(cfg.output_dir, seed=cfg.seed, precision=cfg.precision, grad_accum=cfg.grad_accum,
                             clip_norm=1.0, checkpoint_every=cfg.checkpoint_every, checkpoints=cfg.save_checkpoints,
                             deterministic=cfg.deterministic, show_progress=self.show_progress,
                             name=f"{cfg.task} {cfg.mechanism}")
        return self.engine.train(self)

    def load_data(self) -> None:
        cfg = self.cfg
        _, self.train_feats = self.features("train", cfg.max_train_examples, training=True)
        self.eval_examples, self.eval_feats = self.features(cfg.eval_split, cfg.max_eval_examples)
        self.train_lengths = [feature_length(f) for f in self.train_feats] if cfg.group_by_length else None
        self.train_collate = self.collator()

    def build_model(self) -> torch.nn.Module:
        return self.model  # loaded (after seeding) when the family was made: evaluation and prediction need it

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

    def _loss(self, batch) -> torch.Tensor:
        """The training loss of one batch on the device (the model's own)."""
        return self.model(**batch).loss

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

    def _note_kernels(self, state: EngineState) -> None:
        """Add the kernels the model has run so far (``auto`` resolved) to ``state.extra["kernels"]``."""
        from ..train.provenance import kernels_used

        state.extra["kernels"] = sorted(set(state.extra.get("kernels", [])) | set(kernels_used(self.model)))

    def save_model(self, folder: Path, metrics: dict) -> None:
        def run_files(tmp: Path) -> None:
            self.cfg.save(tmp / "train_config.json")
            atomic_write_json(tmp / "metrics.json", metrics)

        save_pretrained_atomically(folder, self.model, self.tokenizer, then=run_files)

    def _summary(self, state: EngineState) -> dict:
        best = next((h for h in state.history if h["step"] == state.best_step), {})
        return {"task": self.cfg.task, "mechanism": self.cfg.mechanism, "m": self.cfg.m, "k": self.cfg.k,
                "seed": self.cfg.seed, "learning_rate": self.cfg.learning_rate,
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
