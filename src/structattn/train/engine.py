"""The one training engine of every trainer (sentence tasks, reading, translation, parsing, probing), on Accelerate.

A [`Family`][structattn.train.engine.Family] (the encoder families on
[`EncoderFamily`][structattn.train.encoder_family.EncoderFamily]: sentence tasks, span QA, multiple choice;
`ParserFamily`, `TranslationFamily`, `ProbeFamily`) supplies its settings, data, model, optimizer, schedule, batches,
loss, dev evaluation, prediction and summary through named hooks; [`Engine.train`][structattn.train.engine.Engine.train]
calls them in order and does the rest, written once (``docs/engine.md``):

- processes and device: ``Accelerator(cpu=True)`` without a GPU, so that a launch with several processes
  (``torchrun --nproc_per_node N``; ``accelerate launch --multi_gpu`` on GPUs) joins one process group (CPUs:
  gloo); ``--precision fp32|bf16|fp16`` (autocast around the loss, float32 weights; fp16 CUDA only, with loss
  scaling); [`device_description`][structattn.train.engine.device_description];
- seeding ([`Engine.seed`][structattn.train.engine.Engine.seed]) and the update: gradients of ``grad_accum`` batches
  summed, averaged over the processes (one all-reduce), clipped to ``clip_norm`` (0 = none); before optimizer step ``s``
  (0-based) every parameter group's learning rate is its initial rate times ``schedule(s)``. The engine averages the
  gradients itself rather than wrapping the model in DistributedDataParallel, whose hooks need ``forward`` (the parser's
  loss is a method of its own), and the schedule counts optimizer steps whatever the number of processes (the
  earlier loop's ``AcceleratedScheduler`` advanced N steps per update on N processes);
- the batches: ``epoch_batches(epoch)`` lists the epoch's global batches (a permutation seeded by (seed, epoch));
  process r takes batches r, r + N, ... (the last round completed from the epoch's first batches, so that every
  process takes as many steps); ``batch_loss(batch) -> (loss, weight)``, ``loss`` the mean over ``weight`` items: with
  N processes each loss is scaled by ``N * weight / (sum of the processes' weights)``, so the averaged gradient
  is that of the mean over all items (1 process at batch 2b = 2 processes at b); ``passes(batch)`` may cut a batch
  into forward passes, each backpropagated before the next, whose losses add up by their shares;
- evaluation every ``eval_every`` updates and at the last one: ``evaluate_dev(state, end_of_epoch)`` runs on the main
  process only and its entry is broadcast, so every process takes the same decisions; better main metric ->
  ``on_best``; ``patience`` evaluations without improvement stop (0 = never; those at or before the family's
  ``patience_from_step`` do not count); one line per evaluation on stderr
  (step, dev score, best so far), with or without progress bars;
- checkpoints without pickle in ``<output_dir>/checkpoint/``, written atomically at every evaluation and every
  ``checkpoint_every`` updates (0: whenever 5 minutes have passed since the last one)::

      model.safetensors   the weights
      tensors.pt          optimizer state, fp16 loss scale (tensors and numbers, read with weights_only=True)
      rng-<rank>.json     each process's Python, NumPy and torch RNG states and its running training loss
      state.json          EngineState: step, epoch, position in the epoch, best, patience, history, family records
      manifest.json       each file's size and SHA-256 (`structattn.integrity`), written last

  the one before kept as ``previous-checkpoint/``;
- resume from the newest checkpoint whose files are intact (``checkpoint/``, else ``previous-checkpoint/``, else step
  0; one line says which and how many updates are trained again, `Engine._resume`); the output folder is
  created only once the data was read (`Engine.open_output`), which also removes the temporary files of
  interrupted writes;
- SIGINT and SIGTERM (`structattn.stopping`): a signal during an update stops the run after it, with a
  checkpoint of it; elsewhere at once, never inside a checkpoint write; ``STRUCTATTN_SIGNAL_AT`` sends one at a
  named point (the signal tests);
- settings: ``settings`` (what decides a run's result) are recorded in ``<output_dir>/settings.json``; a rerun with
  other settings or another number of processes is refused (UserError), the same one continues from the
  checkpoint exactly (same batches, same RNG streams). ``STRUCTATTN_KILL_AT_STEP=N`` SIGKILLs every process
  right after update N (the kill tests).
"""
from __future__ import annotations

import abc
import dataclasses
import json
import math
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from .. import stopping
from ..errors import UserError
from ..integrity import file_damage, folder_damage, read_manifest, write_manifest
from ..io import atomic_write_json, remove_write_leftovers
from ..stopping import Stopped
from .checkpoint import AtomicDir, load_model_tensors, model_tensors, recover_atomic_dirs, rng_json, set_rng_json
from .config import RESULT_NEUTRAL_FIELDS, check_precision, emulated_bf16_note
from .output_lock import hold_output_dir

CHECKPOINT = "checkpoint"
PREVIOUS_CHECKPOINT = "previous-checkpoint"  # the one before, kept as a fallback when checkpoint/ is damaged
FAULT_ENV = "STRUCTATTN_KILL_AT_STEP"
AUTO_CHECKPOINT_SECONDS = 300  # checkpoint_every=0: at most this much work is lost to a kill


@dataclass
class EngineState:
    """What a resumed run needs besides the tensors (``checkpoint/state.json``); identical on every process."""

    step: int = 0  # optimizer steps taken
    epoch: int = 0  # completed epochs
    step_in_epoch: int = 0  # optimizer steps taken in epoch ``epoch``
    best: float | None = None  # best main metric so far (greater is better)
    best_step: int = -1
    evals_without_improvement: int = 0
    history: list = field(default_factory=list)  # one entry per evaluation (the family's, plus train_loss)
    finished: bool = False
    num_processes: int = 1  # processes that wrote it: the batches and RNG files depend on it
    train_seconds: float = 0.0  # time in updates (no evaluation, no checkpoints), resumes included
    epoch_seconds: list = field(default_factory=list)  # update time of each finished epoch
    elapsed_seconds: float = 0.0  # wall time up to the last checkpoint, resumes included
    extra: dict = field(default_factory=dict)  # the family's own records (JSON values)


def device_description(device: torch.device) -> str:
    """``"cuda (<GPU name>)"``, or ``"cpu (<model name from /proc/cpuinfo>)"``."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    name = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            name = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), name)
    except OSError:
        pass
    return f"cpu ({name})"


def _allow_precision(mixed: str) -> None:
    """Let this process's next Accelerator use ``mixed`` precision: Accelerate keeps one state per process and
    refuses another precision once set (a second run in one Python process), so forget it then, keeping the
    process group of a distributed launch."""
    from accelerate.state import AcceleratorState

    known = AcceleratorState._shared_state.get("_mixed_precision")
    if known is not None and known != mixed:
        AcceleratorState._reset_state(reset_partial_state=False)


def settings_differences(saved: dict, now: dict, defaults: dict | None = None) -> list[str]:
    """``"key: saved -> now"`` for every key whose value differs (a key on one side only: ``<absent>``).

    A key the saved settings lack whose value now is its entry in ``defaults`` is no difference: a setting that a
    later version added, at the value that keeps the behaviour the run was started with."""
    now = json.loads(json.dumps(now))
    defaults = json.loads(json.dumps(defaults or {}))

    def added_at_default(k: str) -> bool:
        return k not in saved and k in now and k in defaults and now[k] == defaults[k]

    return [f"{k}: {saved.get(k, '<absent>')!r} -> {now.get(k, '<absent>')!r}"
            for k in sorted(set(saved) | set(now))
            if saved.get(k, "<absent>") != now.get(k, "<absent>") and not added_at_default(k)]


def config_defaults(config) -> dict:
    """The default of every field of a dataclass ``config`` that has one, as JSON values."""
    fields = {}
    for field in dataclasses.fields(config):
        if field.default is not dataclasses.MISSING:
            fields[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            fields[field.name] = field.default_factory()
    return json.loads(json.dumps(fields))


def seed_run(seed: int, deterministic: bool = False) -> None:
    """Seed Python, NumPy and torch (every device) with ``seed``; ``deterministic``: deterministic torch algorithms
    too. No Accelerator is needed: families seed before they load a model, whether or not they will train it."""
    from accelerate.utils import set_seed

    set_seed(seed, deterministic=deterministic)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)


# ---------------------------------------------------------------------------------------------- batch order
#: The batch order of epoch ``e`` is drawn from the seed ``seed * BATCH_ORDER_STRIDE + e`` (`epoch_seed`), so a
#: resumed run sees exactly the batches the interrupted run would have seen.
BATCH_ORDER_STRIDE = 1_000_003


def epoch_seed(seed: int, epoch: int, stride: int = BATCH_ORDER_STRIDE) -> int:
    """The seed of epoch ``epoch``'s batch order: ``seed * stride + epoch`` (``stride``:
    `Family.order_stride`)."""
    return seed * stride + epoch


def seeded_order(n: int, seed: int, lengths: Sequence[int] | None = None, batch_size: int = 1,
                 group_batches: int = 50) -> list[int]:
    """A permutation of ``range(n)`` that depends only on ``seed`` (an
    [`epoch_seed`][structattn.train.engine.epoch_seed]).

    With ``lengths`` ([n] sizes) each run of ``batch_size`` indices has similar lengths: the permutation is cut
    into groups of ``group_batches * batch_size``, each group sorted by length (longest first) and cut into
    batches, and the order of the full batches shuffled; the one short batch (``n % batch_size``) stays last.
    Less padding per batch, the same items per epoch.
    """
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=g).tolist()
    if lengths is None:
        return perm
    group = group_batches * batch_size
    ordered = []
    for start in range(0, n, group):
        ordered += sorted(perm[start:start + group], key=lambda i: -lengths[i])
    n_full = n // batch_size
    batches = [ordered[b * batch_size:(b + 1) * batch_size] for b in range(n_full)]
    order = torch.randperm(n_full, generator=g).tolist()
    return [i for b in order for i in batches[b]] + ordered[n_full * batch_size:]


def seeded_batches(n: int, batch_size: int, seed: int, lengths: Sequence[int] | None = None) -> list[list[int]]:
    """[`seeded_order`][structattn.train.engine.seeded_order] cut into batches of ``batch_size`` indices (the last one
    may be shorter)."""
    order = seeded_order(n, seed, lengths, batch_size)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


# ---------------------------------------------------------------------------------------------- settings, summary
def resume_settings(config) -> dict:
    """The fields of a dataclass ``config`` that decide a run's result (all but `RESULT_NEUTRAL_FIELDS`),
    as JSON values: what ``settings.json`` records and a resume must match."""
    fields = json.loads(json.dumps(dataclasses.asdict(config)))
    return {k: v for k, v in fields.items() if k not in RESULT_NEUTRAL_FIELDS}


def run_facts(engine: "Engine", model: torch.nn.Module | None = None) -> dict:
    """Where and how a run ran, for its summary: wall time of every start summed, device, torch threads, processes,
    package version and git commit (and the attention kernel(s) that ran when ``model`` is given)."""
    from .provenance import provenance

    return {"wall_seconds": round(engine.elapsed(), 1), "device": device_description(engine.device),
            "torch_threads": torch.get_num_threads(), "processes": engine.num_processes, **provenance(model)}


# ---------------------------------------------------------------------------------------------- optimizers
def adamw_without_decay_on_vectors(model: torch.nn.Module, learning_rate: float,
                                   weight_decay: float) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters: ``weight_decay`` on matrices, none on biases and norms (ndim < 2)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
                              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}], lr=learning_rate)


def linear_schedule(step: int, warmup: int, total: int) -> float:
    """Learning-rate factor of transformers' linear schedule: 0 -> 1 over ``warmup`` steps, then down to 0."""
    if step < warmup:
        return float(step) / float(max(1, warmup))
    return max(0.0, float(total - step) / float(max(1, total - warmup)))


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Learning-rate multiplier before optimizer step ``step`` (0-based): linear to 1 over ``warmup_steps``
    steps (the first step uses 1/warmup_steps), then constant 1."""
    if warmup_steps <= 0:
        return 1.0
    return min(1.0, (step + 1) / warmup_steps)


def warmup_inverse_sqrt(step: int, warmup: int) -> float:
    """Learning-rate factor: linear warm-up to 1 at ``warmup`` updates, then sqrt(warmup / step)."""
    step = max(step, 1)
    return step / warmup if step < warmup else math.sqrt(warmup / step)


# ---------------------------------------------------------------------------------------------- the family interface
@dataclass
class Evaluation:
    """What a family's evaluation gives the engine.

    Attributes:
        entry: the history entry (the family's metrics; the engine adds ``train_loss``).
        score: the number compared to pick the best checkpoint (greater is better); None = the entry's
            `Family.main_metric` (set it when the entry holds a rounded figure).
    """

    entry: dict
    score: float | None = None


class Family(abc.ABC):
    """What one kind of training provides to the [`Engine`][structattn.train.engine.Engine] (``docs/engine.md``).

    The engine calls, in [`Engine.train`][structattn.train.engine.Engine.train]:
    [`settings`][structattn.train.engine.Family.settings] (what a resume must match), the config saved as `config_file`,
    [`load_data`][structattn.train.engine.Family.load_data],
    [`build_model`][structattn.train.engine.Family.build_model], [`updates`][structattn.train.engine.Family.updates],
    [`build_optimizer`][structattn.train.engine.Family.build_optimizer],
    [`schedule`][structattn.train.engine.Family.schedule]; then per update
    [`epoch_batches`][structattn.train.engine.Family.epoch_batches], [`passes`][structattn.train.engine.Family.passes]
    and [`batch_loss`][structattn.train.engine.Family.batch_loss]; per evaluation
    [`evaluate_dev`][structattn.train.engine.Family.evaluate_dev], [`on_best`][structattn.train.engine.Family.on_best],
    [`on_evaluated`][structattn.train.engine.Family.on_evaluated],
    [`train_mode`][structattn.train.engine.Family.train_mode]; at the end
    [`summary`][structattn.train.engine.Family.summary]. [`predict`][structattn.train.engine.Family.predict] is the
    family's inference on inputs of its kind (what evaluation and ``structattn predict`` use).
    """

    engine: "Engine"
    model: torch.nn.Module
    #: the metric of `evaluate`'s entry that picks the best checkpoint (greater is better)
    main_metric: str = "score"
    #: the config file written beside the checkpoint when a run begins (None: none)
    config_file: str | None = None
    #: ``stride`` of `epoch_seed` for this family's batch order
    order_stride: int = BATCH_ORDER_STRIDE
    #: whether every process returns `summary` (False: the main process; the others their step and best)
    summary_on_every_process: bool = False
    #: whether the engine prints a line per evaluation on stderr
    report_evaluations: bool = True

    #: the run's dataclass configuration (saved as `config_file`, keyed by `resume_settings`)
    config: Any

    # ---------------------------------------------------------------- resume
    @property
    def patience(self) -> int:
        """Evaluations without improvement before stopping (0 = never): the config's ``patience``."""
        return getattr(self.config, "patience", 0)

    @property
    def patience_from_step(self) -> int:
        """An evaluation without improvement at or before this update does not count toward ``patience``
        (default 0: every one counts). A family whose dev score swings while its learning rate warms up sets its warm-up
        here, so that a dip in the warm-up cannot end a run."""
        return 0

    def settings(self) -> dict:
        """What a resume must match (``settings.json``): the config's result-changing fields by default."""
        return resume_settings(self.config)

    def setting_defaults(self) -> dict:
        """The value of each setting that earlier versions, which lacked it, behaved as: its field's default (a
        field is only ever added with the old behaviour as its default). A run started before a setting existed
        resumes when it is left there."""
        return config_defaults(self.config)

    # ---------------------------------------------------------------- data and model
    @abc.abstractmethod
    def load_data(self) -> None:
        """Read and encode the training and evaluation data."""

    @abc.abstractmethod
    def build_model(self) -> torch.nn.Module:
        """The model to train (seeding with ``engine.seed()`` where its initialisation must be reproducible)."""

    @abc.abstractmethod
    def updates(self) -> tuple[int, int]:
        """``(total optimizer steps, steps between evaluations)``."""

    def epoch_order_seed(self, seed: int, epoch: int) -> int:
        """The seed of ``epoch``'s batch order ([`epoch_seed`][structattn.train.engine.epoch_seed] with
        `order_stride`)."""
        return epoch_seed(seed, epoch, self.order_stride)

    @abc.abstractmethod
    def epoch_batches(self, epoch: int) -> list:
        """The epoch's global batches in order (each an item the family's
        [`batch_loss`][structattn.train.engine.Family.batch_loss] takes)."""

    # ---------------------------------------------------------------- optimisation
    @abc.abstractmethod
    def build_optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        """The optimizer (its groups' ``lr`` are the peak rates the
        [`schedule`][structattn.train.engine.Family.schedule] factor multiplies)."""

    def schedule(self, total: int) -> Callable[[int], float]:
        """The learning-rate factor before optimizer step ``s`` (0-based); constant 1 by default."""
        return lambda step: 1.0

    @abc.abstractmethod
    def batch_loss(self, batch) -> tuple[torch.Tensor, float]:
        """``(loss, weight)``: the mean loss over ``weight`` items of one batch (under the engine's autocast)."""

    def passes(self, batch) -> list[tuple[Any, float]]:
        """The forward passes one batch is computed in, as ``(part, share)`` with shares summing to 1: the
        batch's loss is the sum of ``share * batch_loss(part)``, each pass backpropagated before the next runs, so
        that a batch too large for memory gives the update it would give in one pass. ``batch_loss(part)``'s
        weight must be the whole batch's (the engine scales by the first pass's). Default: one pass."""
        return [(batch, 1.0)]

    # ---------------------------------------------------------------- evaluation and prediction
    @abc.abstractmethod
    def evaluate_dev(self, state: "EngineState", end_of_epoch: bool) -> Evaluation:
        """Score the dev data (main process only; ``end_of_epoch``: the epoch counter already counts it)."""

    def on_best(self, entry: dict) -> None:
        """After a better evaluation, on every process (files: main process only)."""

    def on_evaluated(self, entry: dict) -> None:
        """After every evaluation, on every process (files: main process only)."""

    def train_mode(self) -> None:
        """Put the model back in training mode (after an evaluation)."""
        self.model.train()

    @abc.abstractmethod
    def predict(self, inputs) -> list:
        """The family's predictions for ``inputs`` (features, sentences or texts), one per input."""

    @abc.abstractmethod
    def summary(self, state: "EngineState") -> dict:
        """The finished run's final steps and summary (the main process; every one with
        `summary_on_every_process`)."""


class Engine:
    """One run's processes, precision, update step, checkpoints and train loop (module docstring)."""

    def __init__(self, output_dir: str | Path, *, seed: int, precision: str = "fp32", grad_accum: int = 1,
                 clip_norm: float = 0.0, checkpoint_every: int = 0, checkpoints: bool = True,
                 deterministic: bool = False, show_progress: bool = True, name: str = "train"):
        from accelerate import Accelerator

        on_gpu = torch.accelerator.is_available()
        check_precision(precision, on_cuda=on_gpu and torch.cuda.is_available())  # before anything is written
        mixed = "no" if precision == "fp32" else precision
        _allow_precision(mixed)
        self.acc = Accelerator(cpu=not on_gpu, mixed_precision=mixed)
        slow = emulated_bf16_note(precision, on_gpu)
        if slow and self.acc.is_main_process:
            print(slow, file=sys.stderr)
        self.out, self.ckpt = Path(output_dir), Path(output_dir) / CHECKPOINT
        # one trainer per folder: refused here when the folder exists, else when begin() creates it
        self.output_lock = hold_output_dir(self.out, create=False) if self.acc.is_main_process else None
        self.seed_value, self.deterministic, self.precision = seed, deterministic, precision
        self.grad_accum, self.clip_norm = grad_accum, clip_norm
        self.checkpoint_every, self.checkpoints = checkpoint_every, checkpoints
        self.show_progress, self.name = show_progress, name
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision == "fp16")
        self.state = EngineState(num_processes=self.num_processes)
        self.running = [0.0, 0]  # this process's training loss (weighted sum, weight) since the last evaluation
        self.session_start = time.time()
        self.settings: dict | None = None  # given by begin()
        self._opened = False  # open_output() done

    @property
    def device(self) -> torch.device:
        """The device this process trains on (``cpu``, not Accelerate's ``cpu:<rank>``, which safetensors and
        ``torch.load`` refuse)."""
        return torch.device("cpu") if self.acc.device.type == "cpu" else self.acc.device

    @property
    def is_main(self) -> bool:
        return self.acc.is_main_process

    @property
    def num_processes(self) -> int:
        return self.acc.num_processes

    def autocast(self):
        """The context forward passes and losses run in: autocast to bfloat16/float16, nothing in fp32 (the run's
        own precision, whatever another Accelerator of this process was told)."""
        import contextlib

        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16 if self.precision == "bf16" else torch.float16)

    def seed(self) -> None:
        """Seed Python, NumPy and torch (every device) with the run's seed (`seed_run`)."""
        seed_run(self.seed_value, self.deterministic)

    def begin(self, settings: dict, defaults: dict | None = None) -> None:
        """Refuse a folder that an earlier structattn wrote
        ([`check_saved_version`][structattn.models.saved_version.check_saved_version]) or that holds a run with other
        ``settings`` (recorded by [`prepare`][structattn.train.engine.Engine.prepare], once the family has read its
        data without error); an existing folder is taken and repaired (`open_output`), a new one is created only by
        `open_output` after the data was read. ``defaults``: `Family.setting_defaults`, so that a setting added since
        the run began, left at the behaviour the run had, is no difference."""
        from ..models.saved_version import check_saved_version

        check_saved_version(self.out)
        if self.is_main and self.out.is_dir():
            self.open_output()
        self.acc.wait_for_everyone()
        path = self.out / "settings.json"
        if path.is_file():
            problem = file_damage(path)
            if problem:
                raise UserError(f"{problem}; it records the settings a resume must match. Restore it, or give "
                                "another --output-dir (or delete that folder) to start over")
            diffs = settings_differences(json.loads(path.read_text(encoding="utf-8")), settings, defaults)
            if diffs:
                raise UserError(f"{self.out} holds a run with other settings ({'; '.join(diffs)}); resuming it "
                                "would mix two runs. Use another --output-dir, or delete that folder to start over.")
        self.settings = settings

    def open_output(self) -> None:
        """Main process: create the output folder (once the run's data was found), take its lock, repair interrupted
        folder writes and remove the temporary files of interrupted single-file writes (no other writer can be
        active: the lock is held)."""
        if self._opened:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        self.output_lock = self.output_lock or hold_output_dir(self.out)  # before repairing: no other writer
        for folder in recover_atomic_dirs(self.out):
            print(f"restored {folder}: a previous run was killed while replacing it", file=sys.stderr)
        removed = remove_write_leftovers(self.out)
        if removed:
            print(f"removed {len(removed)} temporary file(s) of interrupted writes in {self.out} "
                  f"({', '.join(p.name for p in removed[:3])})", file=sys.stderr)
        self._opened = True

    def prepare(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                schedule: Callable[[int], float] = lambda step: 1.0) -> EngineState:
        """Move ``model`` to the device (the same weights on every process) and resume from the checkpoint
        when there is one; the state to continue from."""
        self.model, self.optimizer, self.schedule = model.to(self.device), optimizer, schedule
        if self.settings is not None and self.is_main and not (self.out / "settings.json").is_file():
            if any((f / "state.json").is_file() for f in (self.ckpt, self.out / PREVIOUS_CHECKPOINT)):
                print(f"note: {self.out / 'settings.json'} is missing beside a checkpoint, so the checkpoint's "
                      "settings cannot be compared with this run's; it is written again with this run's",
                      file=sys.stderr)
            atomic_write_json(self.out / "settings.json", self.settings)
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        if self.num_processes > 1:
            for tensor in model.state_dict().values():
                torch.distributed.broadcast(tensor.data, src=0)
        self._resume()
        return self.state

    # ------------------------------------------------------------------ checkpoints
    def _resume(self) -> None:
        """Continue from the newest intact checkpoint: ``checkpoint/``, else ``previous-checkpoint/`` (one line says
        which and how many updates are trained again), else from step 0 (one line says so). A checkpoint that has
        found a best model needs ``best/``, where there is one, intact. Folders not used are set aside as ``<name>.set-aside``."""
        folders = [f for f in (self.ckpt, self.out / PREVIOUS_CHECKPOINT) if f.is_dir()]
        if not folders:
            return
        best = self.out / "best"
        # a family may write no best/ (--keep-best-model false, probes): only a damaged one counts
        best_problem = folder_damage(best) if best.is_dir() else None
        problems, claimed, chosen = [], [], None
        for folder in folders:
            loaded, problem, step = self._read_checkpoint(folder)
            claimed.append(step)
            if problem is None and loaded["state"].best_step >= 0 and best_problem:
                problem = f"{best_problem} (the best model of {folder})"
            if problem is None:
                chosen = (folder, loaded)
                break
            problems.append(problem)
        self.acc.wait_for_everyone()  # every process has read before the main one moves anything
        if chosen is not None and chosen[0] == self.ckpt:
            self._apply_checkpoint(chosen[1])
            print(f"resuming {self.ckpt} at step {self.state.step:,} (epoch {self.state.epoch}, best "
                  f"{self.state.best})", file=sys.stderr)
            return
        lost_from = max((s for s in claimed if s is not None), default=None)
        aside = [f for f in folders if chosen is None or f != chosen[0]]
        if self.is_main:
            for folder in aside:
                self._set_aside(folder)
            if best_problem and best.is_dir() and chosen is None:
                self._set_aside(best)
        self.acc.wait_for_everyone()
        kept = f"; set aside: {', '.join(f.name + '.set-aside' for f in aside)}" if aside else ""
        if chosen is not None:
            self._apply_checkpoint(chosen[1])
            lost = _updates(lost_from - self.state.step) if lost_from is not None else "the updates after it"
            print(f"{problems[0]}; resuming from {chosen[0]} at step {self.state.step:,} instead ({lost} trained "
                  f"again){kept}", file=sys.stderr)
        else:
            lost = _updates(lost_from) if lost_from is not None else "every update"
            print(f"{problems[0]}; no intact checkpoint is left: starting again from step 0 ({lost} trained "
                  f"again){kept}", file=sys.stderr)

    def _set_aside(self, folder: Path) -> None:
        aside = folder.with_name(folder.name + ".set-aside")
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(folder, aside)

    def _read_checkpoint(self, folder: Path) -> tuple[dict | None, str | None, int | None]:
        """Verify and read one checkpoint folder, changing nothing: ``(what it holds, None, step)``, or
        ``(None, what is damaged, the step it claims or None)``. A checkpoint of another number of processes is
        refused (UserError)."""
        from safetensors.torch import load_file

        manifest = read_manifest(folder) or {}
        step = manifest.get("step")
        rng_name = f"rng-{self.acc.process_index}.json"
        problem = folder_damage(folder, required=("state.json", "model.safetensors", "tensors.pt"))
        if problem is None:
            try:
                state = EngineState(**json.loads((folder / "state.json").read_text(encoding="utf-8")))
            except (ValueError, TypeError) as exc:
                return None, f"{folder / 'state.json'} is damaged ({exc})", step
            if state.num_processes != self.num_processes or not (folder / rng_name).is_file():
                raise UserError(f"{folder} was written by {state.num_processes} process(es), this run has "
                                f"{self.num_processes}: the batches and RNG states would not match. Resume with "
                                f"{state.num_processes} process(es), or give a new --output-dir to start over.")
            try:
                loaded = {"state": state, "weights": load_file(str(folder / "model.safetensors")),
                          "tensors": torch.load(folder / "tensors.pt", map_location="cpu", weights_only=True),
                          "rng": json.loads((folder / rng_name).read_text(encoding="utf-8"))}
                return loaded, None, state.step
            except Exception as exc:  # any reader's error on a file that passed the form checks: damaged
                problem = f"{folder} cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
        if step is None:
            try:
                step = json.loads((folder / "state.json").read_text(encoding="utf-8"))["step"]
            except (OSError, ValueError, KeyError, TypeError):
                pass
        return None, problem, step

    def _load_checkpoint(self, folder: Path | None = None) -> None:
        """Read and apply one checkpoint folder (default ``checkpoint/``); UserError naming what is damaged."""
        loaded, problem, _ = self._read_checkpoint(folder or self.ckpt)
        if problem:
            raise UserError(f"{problem}; give another --output-dir, or delete that folder to start over")
        self._apply_checkpoint(loaded)

    def _apply_checkpoint(self, loaded: dict) -> None:
        """Load what `_read_checkpoint` read into the model, optimizer, scaler and RNGs."""
        load_model_tensors(self.model, loaded["weights"])
        tensors = loaded["tensors"]
        self.optimizer.load_state_dict(tensors["optimizer"])
        if self.scaler.is_enabled() and tensors.get("scaler"):
            self.scaler.load_state_dict(tensors["scaler"])
        set_rng_json(loaded["rng"])
        self.running = list(loaded["rng"].get("running_loss", [0.0, 0]))
        self.state = loaded["state"]

    def save_checkpoint(self) -> None:
        """Write ``checkpoint/`` atomically (the one before kept as ``previous-checkpoint/``, with its manifest): every
        process its RNG file, the main process the rest. SIGINT and SIGTERM wait for the commit."""
        with stopping.deferred():
            self._save_checkpoint()

    def _save_checkpoint(self) -> None:
        from safetensors.torch import save_file

        state, acc = self.state, self.acc
        state.elapsed_seconds += time.time() - self.session_start
        self.session_start = time.time()
        # one name every process computes alike
        staging = AtomicDir(self.ckpt, tag="ranks", previous=self.out / PREVIOUS_CHECKPOINT)
        if self.is_main:
            staging.begin()
        acc.wait_for_everyone()
        with staging.writing():  # a full disk: one line, the temporary folder removed, checkpoint/ kept
            atomic_write_json(staging.tmp / f"rng-{acc.process_index}.json",
                              {**rng_json(), "running_loss": [float(self.running[0]), self.running[1]]})
            if self.is_main:
                save_file(model_tensors(self.model), str(staging.tmp / "model.safetensors"))
                scaler = self.scaler.state_dict() if self.scaler.is_enabled() else {}
                with open(staging.tmp / "tensors.pt", "wb") as fh:  # Python's file: ENOSPC stays an errno
                    stopping.signal_point("optimizer-save")
                    torch.save({"optimizer": self.optimizer.state_dict(), "scaler": scaler}, fh)
                atomic_write_json(staging.tmp / "state.json", dataclasses.asdict(state))
        acc.wait_for_everyone()
        if self.is_main:
            staging.commit(step=state.step)
        acc.wait_for_everyone()
        self.last_save = time.time()

    def _checkpoint_due(self) -> bool:
        """Every ``checkpoint_every`` updates; with 0, when the main process has not saved for 5 minutes."""
        if not self.checkpoints:
            return False
        if self.checkpoint_every:
            return self.state.step % self.checkpoint_every == 0
        due = torch.tensor([time.time() - self.last_save >= AUTO_CHECKPOINT_SECONDS], device=self.device)
        if self.num_processes > 1:
            torch.distributed.broadcast(due, src=0)
        return bool(due.item())

    # ------------------------------------------------------------------ the update
    def _batch_backward(self, family: Family, batch) -> None:
        """Forward and backward of one batch, pass by pass ([`Family.passes`][structattn.train.engine.Family.passes]),
        adding to the gradients."""
        process_scale = None
        for part, share in family.passes(batch):
            with self.autocast():
                value, weight = family.batch_loss(part)
            self.running[0] = self.running[0] + value.detach().double() * (weight * share)
            self.running[1] += weight * share
            if process_scale is None:  # one collective per batch, whatever each process's number of passes
                process_scale = self._process_scale(weight)
            factor = share * process_scale
            self._backward(value if factor == 1.0 else value * factor)

    def _process_scale(self, weight: float) -> float:
        """The factor that makes the processes' mean gradient that of the global mean over their items."""
        if self.num_processes == 1:
            return 1.0
        total = torch.tensor([float(weight)], device=self.device)
        torch.distributed.all_reduce(total)
        return self.num_processes * weight / total.item()

    def _backward(self, loss: torch.Tensor) -> None:
        if self.grad_accum > 1:
            loss = loss / self.grad_accum
        self.scaler.scale(loss).backward()

    def _sync_gradients(self) -> list[torch.Tensor]:
        """Average the gradients over the processes (one all-reduce); the parameters that have one."""
        params = [p for group in self.optimizer.param_groups for p in group["params"] if p.grad is not None]
        if self.num_processes > 1 and params:
            from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

            flat = _flatten_dense_tensors([p.grad for p in params])
            torch.distributed.all_reduce(flat)
            flat /= self.num_processes
            for p, g in zip(params, _unflatten_dense_tensors(flat, [p.grad for p in params])):
                p.grad.copy_(g)
        return params

    def _step(self) -> None:
        """Average the gradients over the processes, clip, set the learning rates, step, clear."""
        params = self._sync_gradients()
        if self.clip_norm > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(params, self.clip_norm)
        factor = self.schedule(self.state.step)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * factor
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    def local_batches(self, batches: list) -> list:
        """This process's share of an epoch's global batches: r, r + N, ... (last round completed from the start)."""
        n = self.num_processes
        if n > 1 and len(batches) % n:
            batches = batches + batches[:n - len(batches) % n]
        return batches[self.acc.process_index::n]

    def steps_per_epoch(self, n_batches: int) -> int:
        """Optimizer steps of an epoch of ``n_batches`` global batches."""
        return math.ceil(math.ceil(n_batches / self.num_processes) / self.grad_accum)

    # ------------------------------------------------------------------ the loop
    def train(self, family: Family, *, stop_after: int | None = None) -> dict | None:
        """Run ``family`` from its settings to its summary ([`Family`][structattn.train.engine.Family]): resume check,
        data, model, optimizer, the updates and evaluations, the final steps. The summary (see
        `Family.summary_on_every_process`), or None when ``stop_after`` (tests only) stopped it first."""
        family.engine = self
        try:
            self.begin(family.settings(), family.setting_defaults())
            stopping.signal_point("data")
            family.load_data()
            stopping.raise_if_pending()  # between phases: a signal that a library swallowed
            model = family.build_model()
            total, eval_every = family.updates()
            stopping.raise_if_pending()
            if self.is_main:  # the data was found: now the folder may be created
                self.open_output()
                if family.config_file:
                    family.config.save(self.out / family.config_file)
            state = self.prepare(model, family.build_optimizer(model), family.schedule(total))
            if not self.run(family, total=total, eval_every=eval_every, stop_after=stop_after):
                return None
            if not (self.is_main or family.summary_on_every_process):
                return self.worker_summary()
            stopping.signal_point("summary")
            summary = family.summary(state)
            self.acc.wait_for_everyone()
            return summary
        except Stopped as exc:  # what was committed is kept: the same command continues from it
            exc.resumable = True
            raise

    def run(self, family: Family, *, total: int, eval_every: int, stop_after: int | None = None) -> bool:
        """Train until ``total`` updates or early stopping; True when finished (False: ``stop_after``, tests only,
        returned right after that update without saving anything, as a kill would).

        ``family.evaluate_dev(state, end_of_epoch)`` runs on the main process only, after an epoch's last update with
        the epoch already counted; ``family.on_best(entry)``, ``family.on_evaluated(entry)`` run on every process
        after it (files: main process only); ``family.train_mode()`` puts the model back in training mode.
        """
        from tqdm.auto import tqdm

        state = self.state
        train_mode = family.train_mode
        self.last_save = time.time()
        bar = tqdm(total=total, initial=state.step, desc=self.name, dynamic_ncols=True,
                   disable=not (self.show_progress and self.is_main))
        train_mode()
        while not state.finished:
            local = self.local_batches(family.epoch_batches(state.epoch))
            groups = [local[i:i + self.grad_accum] for i in range(0, len(local), self.grad_accum)]
            for k, group in enumerate(groups[state.step_in_epoch:], start=state.step_in_epoch + 1):
                with stopping.deferred(raise_pending=False):  # a signal stops the run after the update (below)
                    t0 = time.time()
                    for batch in group:
                        self._batch_backward(family, batch)
                    stopping.signal_point("update")
                    self._step()
                    state.step, state.step_in_epoch = state.step + 1, k
                    spent = time.time() - t0
                    state.train_seconds += spent
                    state.extra["current_epoch_seconds"] = state.extra.get("current_epoch_seconds", 0.0) + spent
                    bar.update(1)
                    if stop_after is not None and state.step >= stop_after:
                        bar.close()
                        return False
                    _maybe_inject_fault(state.step)
                    end_of_epoch = k == len(groups)
                    if end_of_epoch:  # counted before an evaluation, so its entry and checkpoint name the next epoch
                        self._end_epoch()
                evaluate = state.step % eval_every == 0 or state.step >= total
                if stopping.pending():
                    self._stop_after_update(checkpoint=not evaluate)
                if evaluate:
                    stop = self._evaluate(family, end_of_epoch)
                    state.finished = stop or state.step >= total
                    if self.checkpoints:
                        self.save_checkpoint()
                    train_mode()
                elif self._checkpoint_due():
                    self.save_checkpoint()
                if state.finished or end_of_epoch:
                    break
            else:  # no update ran: the epoch has no batches
                raise UserError("an epoch without batches: there is no training data")
        bar.close()
        return True

    def _stop_after_update(self, checkpoint: bool) -> None:
        """A signal came during the update just taken: save a checkpoint of it (``checkpoint``: unless an evaluation
        is due, which a checkpoint must follow; one process only, as the others may not have been signalled), then
        raise `structattn.stopping.Stopped`."""
        if checkpoint and self.checkpoints and self.num_processes == 1:
            with stopping.deferred(raise_pending=False):
                self._save_checkpoint()
        stopping.raise_if_pending()

    def _end_epoch(self) -> None:
        state = self.state
        state.epoch_seconds.append(round(state.extra.pop("current_epoch_seconds", 0.0), 3))
        state.epoch, state.step_in_epoch = state.epoch + 1, 0

    def _evaluate(self, family: Family, end_of_epoch: bool) -> bool:
        """Evaluate on the main process, broadcast, update best and patience; True = stop early."""
        from accelerate.utils import broadcast_object_list

        state, main_metric = self.state, family.main_metric
        # end_of_epoch: the epoch counter already counts the finished epoch; the family decides what to record
        result = None
        if self.is_main:
            stopping.signal_point("evaluation")
            evaluation = family.evaluate_dev(state, end_of_epoch)
            score = evaluation.score if evaluation.score is not None else evaluation.entry.get(main_metric)
            result = (evaluation.entry, score)
        result = [result]
        broadcast_object_list(result, from_process=0)  # a no-op with one process
        entry, main = result[0]
        mean = torch.tensor([float(self.running[0]), float(self.running[1])], dtype=torch.float64)
        self.running = [0.0, 0]
        if self.num_processes > 1:  # the mean over processes of each process's mean
            per = torch.tensor([mean[0].item() / max(mean[1].item(), 1)], device=self.device)
            train_loss = self.acc.reduce(per, reduction="mean").item() if mean[1] else None
        else:
            train_loss = (mean[0] / mean[1]).item() if mean[1] else None
        if train_loss is not None:
            entry["train_loss"] = round(train_loss, 4)
        state.history.append(entry)
        if main is not None and (state.best is None or main > state.best):
            state.best, state.best_step, state.evals_without_improvement = main, state.step, 0
            family.on_best(entry)
        elif state.step > family.patience_from_step:
            state.evals_without_improvement += 1
        family.on_evaluated(entry)
        if self.is_main and family.report_evaluations:
            best = f"{state.best:.4g} at step {state.best_step:,}" if state.best is not None else "none"
            shown = f"{main:.4g}" if isinstance(main, (int, float)) else main
            loss = f", train loss {train_loss:.4f}" if train_loss is not None else ""
            print(f"{self.name} step {state.step:,}: dev {main_metric} {shown} (best {best}){loss}",
                  file=sys.stderr, flush=True)
        return bool(family.patience and state.evals_without_improvement >= family.patience)

    def finish(self) -> None:
        """Mark the run finished in the checkpoint (a rerun goes straight to the family's final steps)."""
        self.state.finished = True
        if self.checkpoints and self.is_main and (self.ckpt / "state.json").is_file():
            saved = json.loads((self.ckpt / "state.json").read_text(encoding="utf-8"))
            if saved["step"] == self.state.step:
                with stopping.deferred():  # state.json and the manifest that vouches for it, together
                    atomic_write_json(self.ckpt / "state.json", dataclasses.asdict(self.state))
                    write_manifest(self.ckpt, step=self.state.step)
        self.acc.wait_for_everyone()

    def worker_summary(self) -> dict:
        """What a process other than the main one returns at the end (the main process writes the summary):
        waits for the main process's final steps, then gives this process's step and best."""
        self.acc.wait_for_everyone()
        return {"process": self.acc.process_index, "steps": self.state.step, "best_step": self.state.best_step,
                "best": self.state.best}

    def elapsed(self) -> float:
        """Wall time of the run so far, resumes included."""
        return self.state.elapsed_seconds + time.time() - self.session_start


def _maybe_inject_fault(step: int) -> None:
    """``STRUCTATTN_KILL_AT_STEP=N`` SIGKILLs this process right after update N (no cleanup, no flush), as an
    out-of-memory kill or a pre-emption would."""
    target = os.environ.get(FAULT_ENV)
    if target and int(target) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def _updates(n: int) -> str:
    """``"1 update is"`` / ``"3 updates are"``: the resume line's count."""
    return f"{n:,} update is" if n == 1 else f"{n:,} updates are"
