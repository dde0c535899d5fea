"""Train the BNA chart parser on a treebank: a resumable loop with dev EVALB, best model and test parses.

``train_parser(config, data=...)`` runs one :class:`~structattn.models.parser.ParserConfig` in ``config.output_dir``:

1. reads the trees (:class:`TreebankFiles`: the fixed train/dev/test split of the NLTK WSJ sample by default, or
   the user's own train, dev and optional test files, read and cleaned by the same rules; ``max_train_trees`` /
   ``max_eval_trees`` keep the first N, and the numbers used are printed), and POS tags when ``config.pos`` asks
   for them (spaCy tags cached on disk);
2. trains with Adam in two parameter groups (the pretrained encoder at ``encoder_learning_rate``, everything
   else at ``learning_rate``), both ramped up linearly from 0 over ``warmup_steps`` optimizer steps and then
   held constant; gradients clipped to norm ``clip_grad``; the batch order of epoch e is a permutation seeded
   by (seed, e);
3. parses the dev trees after every epoch (or every ``eval_every`` steps) and scores them with EVALB (each history
   entry also has ``train_loss``, the mean batch loss since the previous evaluation); a better
   dev F1 replaces ``best/`` (``ChartParser.save_pretrained``); ``patience`` evaluations without improvement stop
   the run;
4. after each evaluation writes ``checkpoint/`` (model, optimizer, scheduler, Python/numpy/torch RNG states,
   epoch, step, best F1, history) atomically, so running the same command in the same ``output_dir`` after a
   kill resumes exactly where the last checkpoint left off and ends with the same results;
5. at the end loads ``best/``, parses dev and test, writes ``dev.trees`` and ``test.trees`` (one tree per line in
   treebank order), scores them against the raw treebank files (as ``structattn score evalb`` does) and writes
   ``summary.json`` (its ``data`` says which files were read; with own files and no test file there is no test
   parse and ``test`` is null).

``config.precision`` (``--precision``): ``fp32`` (default), ``bf16`` (forward and loss under bfloat16 autocast,
float32 weights) or ``fp16`` (CUDA only, loss scaling), see :mod:`structattn.train.precision`. Only training runs
in it; dev and test parses run in float32, as a saved parser parses later. It is one of the settings a resume
must match (a checkpoint from before the field existed counts as fp32).

Checkpoints hold no pickle: tensors (weights, optimizer, scheduler, torch RNG, fp16 loss scale) in
``tensors.pt``, read with ``torch.load(..., weights_only=True)``; Python's and NumPy's RNG states as JSON in
``state.json``.

The files a run reads are part of what a resume must match: ``checkpoint/data.json`` records them (path and
SHA-256 of each own file), and a run in the same folder on other files is refused.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..errors import UserError
from ..io import atomic_write_json, atomic_write_text
from .checkpoint import (AtomicDir, numpy_rng_json, python_rng_json, recover_atomic_dirs, set_numpy_rng,
                         set_python_rng, set_torch_rng, torch_rng_tensors)
from .loop import LengthGroupedSampler
from .precision import MixedPrecision, recorded_precision
from .running_mean import RunningMean

# Fields that never change what a run computes; every other field must match for a resume.
RESULT_NEUTRAL_FIELDS = frozenset({"output_dir"})

CHECKPOINT = "checkpoint"
BEST = "best"


# ---------------------------------------------------------------------------------------------- run state
@dataclass
class ParserTrainState:
    """What a resumed run needs besides the tensors (saved as ``checkpoint/state.json``)."""

    step: int = 0  # optimizer steps taken
    epoch: int = 0  # completed epochs
    step_in_epoch: int = 0  # optimizer steps already taken in epoch ``epoch``
    best_f1: float | None = None
    best_epoch: int = -1  # epochs completed when the best dev F1 was reached
    best_step: int = -1
    evals_without_improvement: int = 0
    history: list = field(default_factory=list)  # one entry per dev evaluation (EVALB figures, train_loss)
    epoch_train_seconds: list = field(default_factory=list)  # training time (no evaluation) of each finished epoch
    current_epoch_seconds: float = 0.0  # training time so far in the unfinished epoch
    elapsed_seconds: float = 0.0  # wall time of all sessions up to this checkpoint
    finished: bool = False
    python_rng: Any = None
    numpy_rng: Any = None


# ---------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class TreebankFiles:
    """Where a run's trees come from: the fixed split of the NLTK WSJ sample (every field None), or the user's
    own bracketed treebank files (``train`` and ``dev`` required, ``test`` optional: without it, no test parse).
    """

    train: str | None = None
    dev: str | None = None
    test: str | None = None

    def __post_init__(self):
        if (self.train is None) != (self.dev is None) or (self.test is not None and self.train is None):
            raise UserError("own treebank files: give --train FILE and --dev FILE (and optionally --test FILE); "
                            "without any of them the NLTK WSJ sample's fixed split is used")

    @property
    def own(self) -> bool:
        return self.train is not None

    def splits(self) -> tuple[str, ...]:
        """The splits that are parsed and scored at the end: dev, and test unless own files lack one."""
        return ("dev", "test") if not self.own or self.test is not None else ("dev",)

    def check(self) -> None:
        """UserError for a named file that is missing or a folder (before anything is read or trained)."""
        for split in ("train", "dev", "test"):
            name = getattr(self, split)
            if name is not None and not Path(name).is_file():
                what = "is a folder, not a tree file" if Path(name).is_dir() else "not found"
                raise UserError(f"--{split} {name}: {what}; give a bracketed treebank file (one tree per line, or "
                                "the PTB's multi-line layout)")

    def read(self, split: str, *, clean: bool = True) -> list:
        """The trees of ``split`` in file order (cleaned unless ``clean=False``)."""
        from ..tasks.ptb import read_split, read_treebank

        return read_treebank(getattr(self, split), clean=clean) if self.own else read_split(split, clean=clean)

    def raw_files(self, split: str) -> list[Path]:
        """The file(s) ``structattn score evalb`` scores ``<split>.trees`` against."""
        from ..tasks.ptb import split_files

        return [Path(getattr(self, split))] if self.own else split_files(split)

    def describe(self) -> dict:
        """What the run reads, for summary.json and the resume check: each own file's absolute path and SHA-256."""
        if not self.own:
            return {"treebank": "ptb_sample_nltk", "split": "fixed (train wsj_0001-0139, dev 0140-0159, test 0160-0199)"}
        return {split: {"path": str(Path(name).resolve()),
                        "sha256": hashlib.sha256(Path(name).read_bytes()).hexdigest()}
                for split in ("train", "dev", "test") if (name := getattr(self, split)) is not None}


def _limit(trees: list, limit: int, what: str) -> list:
    """The first ``limit`` trees (0 = all), saying how many of how many are used."""
    used = trees[:limit] if limit else trees
    print(f"{what}: using {len(used):,} of {len(trees):,} trees")
    return used


def _words(trees) -> list[list[str]]:
    return [t.leaves() for t in trees]


def tags_for(trees, config, *, tagger=None) -> list[list[str]] | None:
    """The POS tags the parser sees for ``trees``: None (``pos="none"``), the trees' own tags (``"gold"``) or
    spaCy's (``"spacy"``, cached on disk, see :func:`cached_spacy_tags`)."""
    if config.pos == "none":
        return None
    if config.pos == "gold":
        return [t.tags() for t in trees]
    if config.pos == "spacy":
        return cached_spacy_tags(_words(trees), tagger=tagger)
    raise UserError(f"pos={config.pos!r} is not one of none, spacy, gold")


def _spacy_model_name() -> str:
    from ..settings import DEFAULT_SPACY_MODEL
    return DEFAULT_SPACY_MODEL


def _tag_cache_path(words: list[list[str]], model_name: str) -> Path:
    from ..settings import cache_dir

    version = "unknown"
    try:
        import spacy.util
        version = spacy.util.get_package_version(model_name) or "unknown"
    except Exception:  # no spaCy or no such package: the name alone keys the cache
        pass
    key = json.dumps({"model": model_name, "version": version, "words": words}, ensure_ascii=False)
    return cache_dir() / "ptb_tags" / (hashlib.sha256(key.encode("utf-8")).hexdigest() + ".json")


def cached_spacy_tags(words: list[list[str]], *, tagger=None, model_name: str | None = None) -> list[list[str]]:
    """spaCy's fine-grained tags for each sentence, from ``<cache_dir>/ptb_tags/<sha>.json`` when there.

    The file name hashes the words, the pipeline name and its version. An unreadable or inconsistent file is
    recomputed (and says so). ``tagger(words) -> tags`` defaults to ``ptb_text.spacy_tags`` with the pipeline.
    """
    model_name = model_name or _spacy_model_name()
    path = _tag_cache_path(words, model_name)
    if path.is_file():
        try:
            tags = json.loads(path.read_text(encoding="utf-8"))["tags"]
            if len(tags) == len(words) and all(isinstance(t, list) and len(t) == len(w) for t, w in zip(tags, words)):
                return tags
            print(f"tag cache {path} does not fit its sentences; tagging again")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"tag cache {path} is unreadable ({type(exc).__name__}); tagging again")
    if tagger is None:
        from ..parsing.ptb_text import spacy_tags

        def tagger(sentences):
            return spacy_tags(sentences, model_name)
    tags = [list(t) for t in tagger(words)]
    atomic_write_json(path, {"model": model_name, "tags": tags})
    return tags


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int,
                  lengths: Sequence[int] | None = None) -> list[list[int]]:
    """Tree indices of each batch of epoch ``epoch``: a permutation that depends only on (seed, epoch).

    With ``lengths`` (words per tree) the batches hold trees of similar length
    (:class:`structattn.train.loop.LengthGroupedSampler`): the same trees per epoch with far less padding,
    which matters because the span chart of a batch costs (longest sentence)^2.
    """
    if lengths is not None:
        sampler = LengthGroupedSampler(lengths, batch_size, seed)
        sampler.set_epoch(epoch)
        perm = list(sampler)
    else:
        g = torch.Generator().manual_seed(seed * 1000003 + epoch)
        perm = torch.randperm(n, generator=g).tolist()
    return [perm[i:i + batch_size] for i in range(0, n, batch_size)]


# ---------------------------------------------------------------------------------------------- optimiser
def make_optimizer(model, config) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """Adam over the model's two parameter groups (``ChartParser.parameter_groups``: the pretrained encoder at
    ``encoder_learning_rate``, the rest at ``learning_rate``) with both rates ramped up by :func:`warmup_factor`."""
    optimizer = torch.optim.Adam(model.parameter_groups(config.learning_rate, config.encoder_learning_rate))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_factor(s, config.warmup_steps))
    return optimizer, scheduler


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Learning-rate multiplier before optimizer step ``step`` (0-based): linear to 1 over ``warmup_steps``
    steps (the first step uses 1/warmup_steps), then constant 1."""
    if warmup_steps <= 0:
        return 1.0
    return min(1.0, (step + 1) / warmup_steps)


# ---------------------------------------------------------------------------------------------- checkpoints
def _comparable(config) -> dict:
    """The config's result-changing fields as JSON would give them back."""
    data = json.loads(json.dumps(dataclasses.asdict(config)))
    return {k: v for k, v in data.items() if k not in RESULT_NEUTRAL_FIELDS}


def check_resumable(out: Path, config, data: dict | None = None) -> None:
    """Refuse to resume a checkpoint that another configuration wrote (UserError naming the fields), or one
    trained on other files (``data``: :meth:`TreebankFiles.describe`; a checkpoint without ``data.json`` was
    written before it existed, on the WSJ sample)."""
    saved_path = out / CHECKPOINT / "config.json"
    if not saved_path.is_file():
        return
    if data is not None:
        data_path = out / CHECKPOINT / "data.json"
        saved_data = (json.loads(data_path.read_text(encoding="utf-8")) if data_path.is_file()
                      else TreebankFiles().describe())
        if saved_data != data:
            raise UserError(f"{out} holds a parser run on other treebank files ({saved_data} -> {data}); resuming "
                            "it would mix two runs. Use another --output-dir, or delete that folder to start over.")
    try:
        saved = json.loads(saved_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{saved_path} is unreadable ({exc}); delete {out / CHECKPOINT} to start over, or use "
                        "another --output-dir") from exc
    now = _comparable(config)
    saved = {k: v for k, v in recorded_precision(saved).items() if k not in RESULT_NEUTRAL_FIELDS}
    diffs = [f"{k}: {saved.get(k, '<absent>')!r} -> {now.get(k, '<absent>')!r}"
             for k in sorted(set(now) | set(saved)) if saved.get(k, "<absent>") != now.get(k, "<absent>")]
    if diffs:
        raise UserError(f"{out} holds a parser run with other settings ({'; '.join(diffs)}); resuming it would mix "
                        "two runs. Use another --output-dir, or delete that folder to start over.")


def _capture_rng(state: ParserTrainState) -> dict:
    """Python's and NumPy's RNG states into ``state`` (JSON); torch's returned (tensors)."""
    state.python_rng, state.numpy_rng = python_rng_json(), numpy_rng_json()
    return torch_rng_tensors()


def _restore_rng(state: ParserTrainState, rng: dict) -> None:
    set_python_rng(state.python_rng)
    set_numpy_rng(state.numpy_rng)
    set_torch_rng(rng)


def save_checkpoint(out: Path, config, state: ParserTrainState, model, optimizer, scheduler,
                    precision: MixedPrecision, data: dict | None = None) -> None:
    """Write ``checkpoint/`` (replacing the previous one atomically); ``data`` (the files read) as data.json;
    ``precision``'s loss-scaler state (fp16) in tensors.pt."""
    rng = _capture_rng(state)
    with AtomicDir(out / CHECKPOINT) as tmp:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "rng": rng,
                    "scaler": precision.state_dict()}, tmp / "tensors.pt")
        atomic_write_json(tmp / "state.json", dataclasses.asdict(state))
        config.save(tmp / "config.json")
        if data is not None:
            atomic_write_json(tmp / "data.json", data)


def load_checkpoint(out: Path, model, optimizer, scheduler, precision: MixedPrecision) -> ParserTrainState | None:
    """Restore model, optimizer, scheduler, RNG and (``precision``) loss-scaler states from ``checkpoint/``; None
    when there is none."""
    folder = out / CHECKPOINT
    if not (folder / "state.json").is_file() or not (folder / "tensors.pt").is_file():
        return None
    state = ParserTrainState(**json.loads((folder / "state.json").read_text(encoding="utf-8")))
    tensors = torch.load(folder / "tensors.pt", map_location="cpu", weights_only=True)
    model.load_state_dict(tensors["model"])
    optimizer.load_state_dict(tensors["optimizer"])
    scheduler.load_state_dict(tensors["scheduler"])
    precision.load_state_dict(tensors.get("scaler", {}))  # absent in checkpoints from before the option
    _restore_rng(state, tensors["rng"])
    return state


# ---------------------------------------------------------------------------------------------- environment
def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def training_device() -> torch.device:
    """CUDA when there is a GPU, else the CPU (the summary records which)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_description(device: torch.device | None = None) -> str:
    """``"cpu (<model name from /proc/cpuinfo>)"``, or ``"cuda (<GPU name>)"``."""
    if device is not None and device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    name = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"cpu ({name})"


def _metrics(result) -> dict:
    """recall, precision, f1, complete_match (+ sentence counts) of an EvalbResult."""
    data = result.to_dict()
    keep = ("recall", "precision", "f1", "complete_match", "tagging_accuracy", "sentences", "error_sentences",
            "skipped_sentences")
    return {k: data[k] for k in keep if k in data}


# ---------------------------------------------------------------------------------------------- the run
def train_parser(config, *, show_progress: bool = True, stop_after_steps: int | None = None,
                 command: list[str] | None = None, data: TreebankFiles | None = None) -> dict:
    """Train, evaluate and test one parser configuration in ``config.output_dir``; return the summary.

    ``data``: the treebank files (default: the NLTK WSJ sample's fixed split).

    Rerunning with the same config in the same folder resumes from ``checkpoint/`` (a finished run only
    redoes the final parses). ``stop_after_steps`` (tests only) returns right after that optimizer step
    without saving anything, as a kill would; the returned dict is then ``{"stopped_at_step": N}``.
    ``command`` (the argv) is copied into the summary.
    """
    from tqdm.auto import tqdm

    from ..models.parser import ChartParser
    from ..tasks.evalb import evalb

    data = data or TreebankFiles()
    data.check()
    data_read = data.describe()
    device = training_device()
    precision = MixedPrecision(config.precision, device)  # fp16 on a CPU stops here, before anything is written
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    recover_atomic_dirs(out)  # a kill between AtomicDir's two renames: put the last committed folder back
    check_resumable(out, config, data_read)
    seed_everything(config.seed)

    train_trees = _limit(data.read("train"), config.max_train_trees, "train")
    train_lengths = [len(t.leaves()) for t in train_trees]
    dev_trees = _limit(data.read("dev"), config.max_eval_trees, "dev")
    if not train_trees or not dev_trees:
        raise UserError("no training or dev trees; check the treebank folder and max_train_trees/max_eval_trees")
    train_tags = tags_for(train_trees, config)
    dev_tags = tags_for(dev_trees, config)
    dev_words = _words(dev_trees)

    model = ChartParser.build(config, train_trees).to(device)
    optimizer, scheduler = make_optimizer(model, config)
    steps_per_epoch = math.ceil(len(train_trees) / config.batch_size)
    total = steps_per_epoch * config.epochs

    state = load_checkpoint(out, model, optimizer, scheduler, precision)
    if state is None:
        state = ParserTrainState()
    else:
        print(f"resuming {out / CHECKPOINT}: step {state.step}, {state.epoch} epoch(s) done, "
              f"best dev F1 {state.best_f1}")
    session_start, elapsed_before = time.time(), state.elapsed_seconds

    def evaluate_and_checkpoint(train_loss: float | None) -> bool:
        """Dev EVALB, best/ on improvement, checkpoint/; True = stop early. ``train_loss``: the mean training
        loss per batch since the previous evaluation (or since the resume), None when no batch ran."""
        model.eval()
        with torch.no_grad():
            # Output trees carry the gold tags (as SuPar does): EVALB deletes punctuation by each tree's own
            # tags, and the parser does not predict tags, so its input tags must not decide what is scored.
            predicted = model.parse(dev_words, dev_tags, batch_size=config.batch_size,
                                    output_tags=[t.tags() for t in dev_trees])
        dev = _metrics(evalb(dev_trees, predicted))
        entry = {"step": state.step, "epoch": state.epoch, **dev}
        if train_loss is not None:
            entry["train_loss"] = round(train_loss, 4)
        state.history.append(entry)
        if state.best_f1 is None or dev["f1"] > state.best_f1:
            state.best_f1, state.best_epoch, state.best_step = dev["f1"], state.epoch, state.step
            state.evals_without_improvement = 0
            with AtomicDir(out / BEST) as tmp:
                model.save_pretrained(tmp)
        else:
            state.evals_without_improvement += 1
        stop = bool(config.patience and state.evals_without_improvement >= config.patience)
        state.finished = stop or state.step >= total
        state.elapsed_seconds = elapsed_before + time.time() - session_start
        save_checkpoint(out, config, state, model, optimizer, scheduler, precision, data_read)
        bar.set_postfix(dev_f1=f"{dev['f1']:.2f}", best=f"{state.best_f1:.2f}")
        model.train()
        return state.finished

    bar = tqdm(total=total, initial=state.step, disable=not show_progress, desc="train-parsing")
    model.train()
    batch_losses = RunningMean()  # since the last evaluation
    while not state.finished:
        batches = epoch_batches(len(train_trees), config.batch_size, config.seed, state.epoch,
                                train_lengths if config.group_by_length else None)
        t_epoch = time.time()
        for batch in batches[state.step_in_epoch:]:
            trees = [train_trees[i] for i in batch]
            tags = [train_tags[i] for i in batch] if train_tags is not None else None
            with precision.autocast():
                loss = model.loss(trees, tags)
            optimizer.zero_grad(set_to_none=True)
            precision.step(loss, optimizer, model.parameters(), config.clip_grad)
            scheduler.step()
            state.step += 1
            state.step_in_epoch += 1
            loss_value = loss.item()
            batch_losses.add(loss_value)
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.3f}")
            if stop_after_steps is not None and state.step >= stop_after_steps:
                bar.close()
                return {"stopped_at_step": state.step}
            if config.eval_every and state.step % config.eval_every == 0:
                state.current_epoch_seconds += time.time() - t_epoch
                if evaluate_and_checkpoint(batch_losses.take()):
                    break
                t_epoch = time.time()
        else:  # the epoch ran to its end
            state.current_epoch_seconds += time.time() - t_epoch
            state.epoch_train_seconds.append(round(state.current_epoch_seconds, 3))
            state.epoch += 1
            state.step_in_epoch, state.current_epoch_seconds = 0, 0.0
            evaluated = bool(state.history) and state.history[-1]["step"] == state.step
            if not evaluated and (not config.eval_every or state.step >= total):
                evaluate_and_checkpoint(batch_losses.take())
    bar.close()
    return _finish(config, out, state, wall_before=elapsed_before, session_start=session_start, command=command,
                   data=data)


def _finish(config, out: Path, state: ParserTrainState, *, wall_before: float, session_start: float,
            command, data: TreebankFiles) -> dict:
    """Load best/, parse dev and test (when there is a test file), write the .trees files, score them against
    the raw treebank files and write summary.json (``wall_seconds``: all sessions of the run, resumed ones
    included, final parses too)."""
    from ..models.parser import ChartParser
    from .provenance import provenance
    from ..tasks.evalb import evalb, evalb_files

    device = training_device()
    best = ChartParser.from_pretrained(out / BEST, device=device)
    best.eval()
    scores = {"test": None}
    for split in data.splits():
        trees = data.read(split)
        used = _limit(trees, config.max_eval_trees, f"{split} (final parse)")
        with torch.no_grad():
            predicted = best.parse(_words(used), tags_for(used, config), batch_size=config.batch_size,
                                   output_tags=[t.tags() for t in used])  # gold tags, see evaluate_and_checkpoint
        path = out / f"{split}.trees"
        atomic_write_text(path, "".join(t.to_string() + "\n" for t in predicted))
        if len(used) == len(trees):  # the same figures `structattn score evalb <raw files> <split>.trees` gives
            result = evalb_files(data.raw_files(split), path)
        else:  # only the first N trees were parsed: score them against the first N raw trees
            result = evalb(data.read(split, clean=False)[:len(used)], predicted)
        scores[split] = {**_metrics(result), "trees": len(used), "of_trees": len(trees)}
    summary = {
        "config": config.to_dict(),
        "data": data.describe(),
        "layers": list(best.kinds),
        "dev": scores["dev"], "test": scores["test"],
        "best_dev_f1": state.best_f1, "best_epoch": state.best_epoch, "best_step": state.best_step,
        "steps": state.step, "epochs_completed": state.epoch,
        "history": state.history,
        "wall_seconds": round(wall_before + time.time() - session_start, 1),
        "train_seconds_per_epoch": state.epoch_train_seconds,
        "device": device_description(device), "torch_threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in best.parameters()),
        "trainable_parameters": sum(p.numel() for p in best.parameters() if p.requires_grad),
        "provenance": provenance(), "command": command,
    }
    atomic_write_json(out / "summary.json", summary)
    return summary
