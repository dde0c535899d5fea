"""The fine-tuning loop on Accelerate: train, evaluate every N steps, keep the best, resume.

The same code runs on one CPU, one GPU or many processes (``accelerate launch``).
State that makes a run resumable lives in ``<output_dir>/checkpoint-<step>/``:
model, optimizer, scheduler and RNG states (``Accelerator.save_state``) plus
``trainer_state.json`` (step, epoch, position in the epoch, best metric, history: per evaluation the dev metrics and
``train_loss``, the mean training loss since the previous evaluation).
The data order of epoch e is a permutation seeded by (seed, e), so a resumed run
sees exactly the batches the interrupted run would have seen.

With several processes every one keeps an identical ``TrainerState``: the main process
evaluates and broadcasts the result, so all take the same early-stopping decision at the
same step; every process writes its own RNG state into the shared checkpoint folder, and a
resume loads each one (and refuses a checkpoint written by another number of processes).
"""
from __future__ import annotations

import json
import logging
import math
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from ..errors import UserError
from ..tasks import get_task
from ..io import atomic_write_json
from .checkpoint import AtomicDir, latest_checkpoint, recover_atomic_dirs
from .config import RESULT_NEUTRAL_FIELDS, TrainConfig, check_precision
from .data import StructureSpec, aggregate_predictions, build_features
from .model_loading import load_model_and_tokenizer
from .running_mean import RunningMean

log = logging.getLogger(__name__)


class EpochPermutationSampler(Sampler[int]):
    """Shuffles with a permutation that depends only on (seed, epoch)."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1000003 + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self) -> int:
        return self.n


class LengthGroupedSampler(EpochPermutationSampler):
    """A (seed, epoch) permutation in which each run of ``batch_size`` indices has similar lengths.

    Less padding per batch, the same examples per epoch: the permutation is cut into groups of
    ``group_batches * batch_size``, each group sorted by length (longest first) and cut into batches,
    and the order of the full batches shuffled. The one short batch (``n % batch_size``) stays last,
    because the DataLoader cuts the index stream into batches in order.

    lengths: [n] token count of every feature.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int, group_batches: int = 50):
        super().__init__(len(lengths), seed)
        self.lengths = list(lengths)
        self.batch_size, self.group = batch_size, group_batches * batch_size

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1000003 + self.epoch)
        perm = torch.randperm(self.n, generator=g).tolist()
        ordered = []
        for start in range(0, self.n, self.group):
            ordered += sorted(perm[start:start + self.group], key=lambda i: -self.lengths[i])
        n_full = self.n // self.batch_size
        batches = [ordered[b * self.batch_size:(b + 1) * self.batch_size] for b in range(n_full)]
        order = torch.randperm(n_full, generator=g).tolist()
        return iter([i for b in order for i in batches[b]] + ordered[n_full * self.batch_size:])


@dataclass
class TrainerState:
    global_step: int = 0
    epoch: int = 0
    step_in_epoch: int = 0  # optimizer steps already taken in the current epoch
    best_metric: float | None = None
    best_step: int = -1
    evals_without_improvement: int = 0
    history: list = field(default_factory=list)
    finished: bool = False
    num_processes: int = 1  # processes that wrote it: the data shards and RNG files depend on it
    kernels: list = field(default_factory=list)  # attention kernels that actually ran (resolved, never "auto")

    def save(self, path: Path) -> None:
        atomic_write_json(path, self.__dict__)

    @classmethod
    def load(cls, path: Path) -> "TrainerState":
        return cls(**json.loads(Path(path).read_text()))


FAULT_ENV = "STRUCTATTN_KILL_AT_STEP"


def _maybe_inject_fault(step: int) -> None:
    """Fault injection for the resume test: ``STRUCTATTN_KILL_AT_STEP=N`` SIGKILLs this process right
    after optimizer step N (no cleanup, no flush), exactly as an out-of-memory kill or a pre-emption would."""
    target = os.environ.get(FAULT_ENV)
    if target and int(target) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def structure_spec_for(model, cfg: TrainConfig) -> StructureSpec:
    """The relation the model's installed mechanism needs (the model is the one source of truth)."""
    from ..models.encoder import mechanism_of

    return StructureSpec.for_mechanism(mechanism_of(model), need_parents=cfg.lisa_weight > 0)


def _allow_precision(mixed: str) -> None:
    """Let this process's next Accelerator use ``mixed`` precision. Accelerate keeps one state per process and
    refuses another precision once it is set (a second run in one Python session, e.g. fp32 then bf16): forget
    that state then, keeping the process group (PartialState) of a distributed launch."""
    from accelerate.state import AcceleratorState

    known = AcceleratorState._shared_state.get("_mixed_precision")
    if known is not None and known != mixed:
        AcceleratorState._reset_state(reset_partial_state=False)


class Trainer:
    """Fine-tunes one configuration; see module docstring."""

    def __init__(self, cfg: TrainConfig, *, show_progress: bool = True):
        from accelerate import Accelerator
        from accelerate.utils import set_seed

        self.cfg = cfg
        self.show_progress = show_progress
        self.task = self._get_task(cfg.task)
        self.out = Path(cfg.output_dir)
        # Without an accelerator device, Accelerate joins the processes of a launch (torchrun, accelerate
        # launch) into one gloo group only when told cpu=True; otherwise every process trains alone.
        on_gpu = torch.accelerator.is_available()
        check_precision(cfg.precision, on_cuda=on_gpu and torch.cuda.is_available())
        # bf16/fp16: Accelerate runs forward and loss under autocast (fp32 master weights; fp16 adds loss scaling)
        mixed = "no" if cfg.precision == "fp32" else cfg.precision
        _allow_precision(mixed)
        self.accelerator = Accelerator(gradient_accumulation_steps=cfg.grad_accum, cpu=not on_gpu,
                                       mixed_precision=mixed)
        set_seed(cfg.seed, deterministic=cfg.deterministic)
        if cfg.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        self.model, self.tokenizer = self._load_model()
        self.structure = structure_spec_for(self.model, cfg)
        self.label_list = list(self.task.label_list) if getattr(self.task, "label_list", None) else None
        self.label_to_id = {lab: i for i, lab in enumerate(self.label_list)} if self.label_list else None
        if cfg.lisa_weight > 0:
            from ..layers.lisa import LisaSupervision
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
        """The model to train and its tokenizer: a transformers task model, or an SG-Net model when the
        configuration asks for the SG-Net layer (``sgnet`` other than ``none``)."""
        if self.cfg.sgnet != "none" or self.cfg.pool != "first":  # transformers' task models pool [CLS]
            from .sgnet_loading import load_sgnet_and_tokenizer

            return load_sgnet_and_tokenizer(self.cfg, head=self.task.kind, num_labels=self.task.num_labels)
        return load_model_and_tokenizer(self.cfg, self.task)

    # ------------------------------------------------------------------ data
    def features(self, split: str, limit: int = 0, training: bool = False):
        examples = self.task.read(split)
        if limit:
            examples = examples[:limit]
        feats = build_features(self.task, examples, self.tokenizer, self.structure, max_length=self.cfg.max_length,
                               stride=self.cfg.stride, parser_name=self.cfg.parser, label_to_id=self.label_to_id,
                               long_inputs=self.cfg.long_inputs, training=training, split=split,
                               show_progress=self.show_progress and self.accelerator.is_main_process)
        if self._sg_head() is not None:
            self._add_sg_structures(examples, feats)
        return examples, feats

    def _sg_head(self) -> str | None:
        """The head whose SG-layer mask rules apply, or None when the model has no masked SG layer."""
        return None if self.cfg.sgnet in ("none", "vanilla") else self.task.kind

    def _add_sg_structures(self, examples, feats) -> None:
        """Give every feature the SDOI structure of its example (``sg_structure``) for the SG layer's mask."""
        from ..structure import build_word_structures
        from .data import parse_examples

        pa, pb = parse_examples(examples, self.cfg.parser,
                                show_progress=self.show_progress and self.accelerator.is_main_process)
        structures = build_word_structures(pa, pb, "sdoi")
        for feat in feats:
            feat["sg_structure"] = structures[feat["example_index"]]

    def collator(self):
        from ..structure import StructureCollator

        base = StructureCollator(self.tokenizer.pad_token_id, self.structure.rules,
                                 with_structure=self.structure.relation is not None)
        if self._sg_head() is not None:
            from .sgnet_loading import SGMaskCollator, sg_rules

            base = SGMaskCollator(base, sg_rules(self._sg_head(), self.cfg.pool))

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
    @torch.no_grad()
    def predict_logits(self, feats, gate_stats: dict | None = None) -> list[np.ndarray]:
        """Logits per window (``[T, C]`` for tagging, ``[C]`` otherwise).

        With ``gate_stats`` (a dict), the mean gate value of every mechanism layer over the real
        tokens is stored in it as ``{"gate_means": [per layer]}`` (the SLA paper's Figure 2).
        """
        from contextlib import nullcontext

        from ..attention.integration import record, runtime_of

        model = self.accelerator.unwrap_model(self.model)
        model.eval()
        collate = self.collator()
        outs = []
        bs = self.cfg.eval_batch_size
        sums: dict[int, float] = {}
        counts: dict[int, float] = {}
        track = gate_stats is not None and runtime_of(model) is not None
        for start in range(0, len(feats), bs):
            chunk = feats[start:start + bs]
            batch = collate(chunk)
            batch.pop("labels", None)
            parents = batch.pop("parent_targets", None)
            batch = {k: v.to(self.accelerator.device) for k, v in batch.items()}
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

    # ------------------------------------------------------------------ training
    def train(self) -> dict:
        cfg, acc = self.cfg, self.accelerator
        self.out.mkdir(parents=True, exist_ok=True)
        self._recover_interrupted_writes()
        ckpt = latest_checkpoint(self.out)
        self._check_resumable(ckpt)
        cfg.save(self.out / "train_config.json")
        train_examples, train_feats = self.features("train", cfg.max_train_examples, training=True)
        eval_examples, eval_feats = self.features(cfg.eval_split, cfg.max_eval_examples)
        if cfg.group_by_length:
            sampler = LengthGroupedSampler([self.feature_length(f) for f in train_feats], cfg.batch_size, cfg.seed)
        else:
            sampler = EpochPermutationSampler(len(train_feats), cfg.seed)
        # The loader gets a private generator: creating an iterator draws a seed from it, and drawing from
        # the global RNG instead would shift every dropout mask after a resume.
        loader = DataLoader(train_feats, batch_size=cfg.batch_size, sampler=sampler, collate_fn=self.collator(),
                            drop_last=False, generator=torch.Generator().manual_seed(cfg.seed))
        # Each process sees 1/num_processes of the batches: count an epoch in this process's batches.
        prepared_loader = acc.prepare(loader)
        steps_per_epoch = math.ceil(len(prepared_loader) / cfg.grad_accum)
        total = cfg.max_steps or int(math.ceil(steps_per_epoch * cfg.epochs))
        params = [p for p in self.model.parameters() if p.requires_grad]
        decay = [p for p in params if p.ndim >= 2]
        no_decay = [p for p in params if p.ndim < 2]
        optim = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=cfg.learning_rate)
        from transformers import get_linear_schedule_with_warmup
        sched = get_linear_schedule_with_warmup(optim, int(cfg.warmup_ratio * total), total)
        self.model, optim, sched = acc.prepare(self.model, optim, sched)
        eval_every = cfg.eval_every or steps_per_epoch

        state = TrainerState(num_processes=acc.num_processes)
        if ckpt is not None:
            state = TrainerState.load(ckpt / "trainer_state.json")
            self._check_same_processes(ckpt, state)
            acc.load_state(str(ckpt))
            log.info("resumed from %s (step %d)", ckpt, state.global_step)
            if state.finished:
                return self._summary(state)
        from tqdm.auto import tqdm
        bar = tqdm(total=total, initial=state.global_step, disable=not (self.show_progress and acc.is_main_process),
                   desc=f"{cfg.task} {cfg.mechanism}")
        t0 = time.time()
        stop = False
        batch_losses = RunningMean()  # training loss since the last evaluation, this process (a tensor sum: no sync)
        while state.global_step < total and not stop:
            skip = state.step_in_epoch * cfg.grad_accum
            epoch_loader = acc.skip_first_batches(prepared_loader, skip) if skip else prepared_loader
            # Accelerate's loaders re-seed the sampler from their own iteration counter on every iter();
            # a fresh (skipping) loader starts that counter at 0, so set the real epoch explicitly.
            epoch_loader.set_epoch(state.epoch)
            # ... and tell the sampler itself: with several processes the skipping loader nests it where
            # Accelerate's set_epoch does not reach (the resumed epoch would reuse epoch 0's order).
            sampler.set_epoch(state.epoch)
            self.model.train()
            for batch in epoch_loader:
                with acc.accumulate(self.model):
                    loss = self._loss(batch)
                    acc.backward(loss)
                    batch_losses.add(loss.detach().float())
                    if acc.sync_gradients:
                        acc.clip_grad_norm_(self.model.parameters(), 1.0)
                    optim.step()
                    sched.step()
                    optim.zero_grad()
                if not acc.sync_gradients:
                    continue
                state.global_step += 1
                state.step_in_epoch += 1
                bar.update(1)
                _maybe_inject_fault(state.global_step)
                if state.global_step % cfg.log_every == 0:
                    bar.set_postfix(loss=f"{loss.item():.4f}")
                if state.global_step % eval_every == 0 or state.global_step == total:
                    # every process reaches this step; the mean over processes of their mean losses
                    # this step's batch ran, so the mean is never None here
                    mean = torch.as_tensor(batch_losses.take(), device=acc.device)
                    train_loss = acc.reduce(mean, reduction="mean").item()
                    stop = self._evaluate_and_checkpoint(state, eval_examples, eval_feats, time.time() - t0,
                                                         train_loss)
                    self.model.train()
                if stop or state.global_step >= total:
                    break
            else:
                state.epoch += 1
                state.step_in_epoch = 0
        bar.close()
        state.finished = True
        self._note_kernels(state)
        if acc.is_main_process:
            state.save(self.out / "trainer_state.json")
            if cfg.save_checkpoints:
                ck = latest_checkpoint(self.out)
                if ck is not None:
                    state.save(ck / "trainer_state.json")
        return self._summary(state)

    def _loss(self, batch) -> torch.Tensor:
        parent = batch.pop("parent_targets", None)
        if self.lisa is not None:
            with self.lisa.capture(parent, batch["attention_mask"]):
                out = self.model(**batch)
            return out.loss + self.cfg.lisa_weight * self.lisa.loss()
        return self.model(**batch).loss

    def _evaluate_and_checkpoint(self, state: TrainerState, examples, feats, elapsed: float,
                                 train_loss: float | None = None) -> bool:
        """Evaluate, save best model and a resumable checkpoint; return True to stop early.

        ``train_loss`` (the mean training loss over the batches since the previous evaluation, or since a
        resume, averaged over processes) goes into the history entry beside the dev metrics.

        Called by every process at the same step; all of them get the same metrics and so update
        their ``state`` identically (same best, same patience count, same decision to stop).
        """
        acc = self.accelerator
        entry = self._evaluate_on_main(state, examples, feats, elapsed)
        metrics = {k: v for k, v in entry.items() if k not in ("step", "epoch", "elapsed_s")}
        if train_loss is not None:
            entry["train_loss"] = round(train_loss, 4)
        main = metrics.get(self.main_metric)
        state.history.append(entry)
        self._note_kernels(state)
        improved = main is not None and (state.best_metric is None or main > state.best_metric)
        if improved:
            state.best_metric, state.best_step = main, state.global_step
            state.evals_without_improvement = 0
            if self.cfg.keep_best_model and acc.is_main_process:
                self.save_model(self.out / "best", metrics)
        else:
            state.evals_without_improvement += 1
        stop = bool(self.cfg.patience and state.evals_without_improvement >= self.cfg.patience)
        if self.cfg.save_checkpoints:
            self._save_checkpoint(state)
        acc.wait_for_everyone()
        return stop

    def _evaluate_on_main(self, state: TrainerState, examples, feats, elapsed: float) -> dict:
        """The history entry of this evaluation: computed by the main process, broadcast to all."""
        from accelerate.utils import broadcast_object_list

        acc = self.accelerator
        entry = [None]
        if acc.is_main_process:
            entry[0] = {"step": state.global_step, "epoch": state.epoch, "elapsed_s": round(elapsed, 1),
                        **self.evaluate(examples, feats, with_gates=True)}
        broadcast_object_list(entry, from_process=0)  # a no-op with one process
        return entry[0]

    def _save_checkpoint(self, state: TrainerState) -> None:
        """Every process writes into one shared temporary folder (the main process: model, optimizer,
        scheduler, trainer state; each process: its RNG state); the main process commits it once all
        are done, then prunes older checkpoints."""
        import shutil

        acc = self.accelerator
        final = self.out / f"checkpoint-{state.global_step}"
        staging = AtomicDir(final, tag="ranks")  # one name that every process computes alike
        if acc.is_main_process:
            staging.begin()
        acc.wait_for_everyone()
        acc.save_state(str(staging.tmp))
        if acc.is_main_process:
            state.save(staging.tmp / "trainer_state.json")
        acc.wait_for_everyone()
        if acc.is_main_process:
            staging.commit()
            for old in self.out.glob("checkpoint-*"):  # keep only the newest resumable checkpoint
                if old != final and old.is_dir():
                    shutil.rmtree(old)

    def _recover_interrupted_writes(self) -> None:
        """Repair folders whose atomic replacement was killed half-way (e.g. ``best/``) before reading any."""
        if self.accelerator.is_main_process:
            for folder in recover_atomic_dirs(self.out):
                log.warning("restored %s: a previous run was killed while replacing it", folder)
        self.accelerator.wait_for_everyone()

    def _check_same_processes(self, ckpt: Path, state: TrainerState) -> None:
        """Refuse a checkpoint that cannot resume exactly with this number of processes."""
        acc = self.accelerator
        if state.num_processes != acc.num_processes:
            raise UserError(f"{ckpt} was written by {state.num_processes} process(es), this run has "
                            f"{acc.num_processes}: the data shards and RNG states would not match. Resume with "
                            f"{state.num_processes} process(es), or give a new --output-dir to start over.")
        rng_file = ckpt / f"random_states_{acc.process_index}.pkl"
        if not rng_file.is_file():
            raise UserError(f"{ckpt} holds no RNG state for process {acc.process_index} ({rng_file.name} is "
                            "missing), so the run cannot resume exactly. Give a new --output-dir, or delete "
                            "that folder to start over.")

    def _note_kernels(self, state: TrainerState) -> None:
        """Add the kernels the model has run so far (``auto`` resolved) to ``state.kernels``."""
        from .provenance import kernels_used

        state.kernels = sorted(set(state.kernels) | set(kernels_used(self.accelerator.unwrap_model(self.model))))

    def save_model(self, folder: Path, metrics: dict) -> None:
        model = self.accelerator.unwrap_model(self.model)
        with AtomicDir(folder) as tmp:
            model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            self.cfg.save(tmp / "train_config.json")
            atomic_write_json(tmp / "metrics.json", metrics)

    # Settings that do not change what a run computes; anything else must match to resume.
    _RESUME_FREE = RESULT_NEUTRAL_FIELDS  # the same fields a sweep ignores when it keys runs

    def _check_resumable(self, ckpt: Path | None) -> None:
        """Refuse to resume a checkpoint that another configuration wrote (it would mix two runs)."""
        saved_path = self.out / "train_config.json"
        if ckpt is None or not saved_path.is_file():
            return
        saved = TrainConfig.load(saved_path)
        diffs = [f"{k}: {getattr(saved, k)!r} -> {getattr(self.cfg, k)!r}"
                 for k in sorted(vars(self.cfg)) if k not in self._RESUME_FREE
                 and getattr(saved, k) != getattr(self.cfg, k)]
        if diffs:
            raise UserError(f"{self.out} holds a run ({ckpt.name}) with other settings ({'; '.join(diffs)}); "
                            "resuming it would mix two runs. Give a new --output-dir, or delete that folder "
                            "to start over.")

    def _summary(self, state: TrainerState) -> dict:
        best = next((h for h in state.history if h["step"] == state.best_step), {})
        return {"task": self.cfg.task, "mechanism": self.cfg.mechanism, "m": self.cfg.m, "k": self.cfg.k,
                "lisa_weight": self.cfg.lisa_weight, "seed": self.cfg.seed, "learning_rate": self.cfg.learning_rate,
                "epochs": self.cfg.epochs, "model": self.cfg.model or "all-MiniLM-L6-v2",
                "main_metric": self.main_metric, "best": state.best_metric, "best_step": state.best_step,
                "best_metrics": {k: v for k, v in best.items() if k not in ("step", "epoch", "elapsed_s")},
                "steps": state.global_step, "history": state.history, **self._provenance(state)}

    def _provenance(self, state: TrainerState) -> dict:
        """Package version, git commit and the kernel(s) that ran (recorded in the state, so a finished
        run that is asked again still reports what ran when it trained)."""
        from .provenance import provenance

        self._note_kernels(state)
        return {**provenance(), "kernel": "+".join(state.kernels) or None}
