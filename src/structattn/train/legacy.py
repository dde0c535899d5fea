"""Checkpoints of earlier versions: read once without pickle and rewritten in the engine's layout.

Earlier trainers wrote checkpoints in layouts of their own: the sentence trainer ``checkpoint-<step>/`` with
Accelerate's ``save_state`` (``model.safetensors``, ``optimizer.bin``, ``scheduler.bin``, ``random_states_<i>.pkl``
per process) and ``trainer_state.json``; translation ``checkpoint/`` with ``model.safetensors`` + ``tensors.pt``
+ ``state.json``, or before that a pickled ``trainer.pt``; parsing ``checkpoint/`` with ``tensors.pt`` (the model
inside) + ``state.json`` + ``config.json`` + ``data.json``. The ``upgrade_*`` functions turn such a folder into
the layout of [`structattn.train.engine`][structattn.train.engine] (and write ``settings.json`` from the recorded
settings, so a rerun with other ones is refused as before). Accelerate's ``random_states_<i>.pkl`` are ``torch.save``
files holding NumPy's state as an array: they are read with ``weights_only=True`` and only NumPy's array reconstruction
allowed. Tensors are read with ``torch.load(..., weights_only=True)`` only: a file that loader refuses is not read at
all (unpickling it could run any code it holds) and the run stops with a [`UserError`][structattn.errors.UserError] that
says what to do. Such checkpoints were written at an evaluation, so the running training loss is empty.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from ..errors import UserError
from ..io import atomic_write_json
from ..integrity import MANIFEST
from .checkpoint import AtomicDir
from .config import LATER_FIELDS, without_later_fields
from .engine import CHECKPOINT, EngineState

OLD_TRAINER_FILE = "trainer.pt"  # the pickled trainer state of the earliest translation checkpoints


def recorded_precision(saved: dict) -> dict:
    """A run's saved settings with ``precision`` filled in where it was recorded before the field existed: every
    such run trained in fp32, so it resumes under the default and is refused under another precision."""
    return {"precision": LATER_FIELDS["precision"], **saved}


def _safe_load(path: Path, run: Path, numpy_arrays: bool = False):
    import numpy as np

    allowed = [np._core.multiarray._reconstruct, np.ndarray, np.dtype, np.dtypes.UInt32DType] if numpy_arrays else []
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch's refusal (an UnpicklingError), a truncated or foreign file
        raise UserError(
            f"{path} was written by an earlier structattn and holds something torch's safe loader "
            f"(weights_only=True) does not read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). It is "
            f"not unpickled, because unpickling a file can run any code in it. Delete {run} to train this run "
            "again from the start, or use another --output-dir.") from None


def _rewrite(ckpt: Path, weights: dict, optimizer: dict, scaler: dict, rng: dict | list, state: EngineState) -> None:
    """Write ``ckpt`` in the engine's layout (``rng``: one process's states, or a list of every process's)."""
    from safetensors.torch import save_file

    seen, unique = set(), {}
    for key, value in weights.items():  # tied tensors once (safetensors refuses shared storage)
        if value.data_ptr() not in seen:
            seen.add(value.data_ptr())
            unique[key] = value.contiguous()
    with AtomicDir(ckpt) as tmp:
        save_file(unique, str(tmp / "model.safetensors"))
        torch.save({"optimizer": optimizer, "scaler": scaler or {}}, tmp / "tensors.pt")
        for rank, states in enumerate(rng if isinstance(rng, list) else [rng]):
            atomic_write_json(tmp / f"rng-{rank}.json", {**states, "running_loss": [0.0, 0]})
        atomic_write_json(tmp / "state.json", dataclasses.asdict(state))
    print(f"rewrote {ckpt} (a checkpoint of an earlier version) in today's layout, without pickle")


def _record_settings(out: Path, saved: dict, neutral, later: dict | None = None) -> None:
    if not (out / "settings.json").is_file():
        settings = {k: v for k, v in recorded_precision(saved).items() if k not in neutral}
        atomic_write_json(out / "settings.json", without_later_fields(settings, later or {}))


def upgrade_translation_checkpoint(out: Path, seed: int, neutral: frozenset, later: dict | None = None) -> None:
    """Rewrite an earlier translation ``checkpoint/`` (and record ``run_config.json`` without the ``neutral``
    fields, and the ``later`` ones at their earlier value, as ``settings.json``)."""
    from safetensors.torch import load_file

    from .checkpoint import numpy_rng_json

    ckpt = out / CHECKPOINT
    if (out / "run_config.json").is_file():  # recorded by every version at the start of a run
        _record_settings(out, json.loads((out / "run_config.json").read_text(encoding="utf-8")), neutral, later)
    if not (ckpt / "state.json").is_file() or _engine_layout(ckpt):
        return
    old = json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
    if (ckpt / "tensors.pt").is_file():
        tensors = _safe_load(ckpt / "tensors.pt", out)
    else:
        extra = _safe_load(ckpt / OLD_TRAINER_FILE, out)
        try:
            tensors = {"optimizer": extra["optimizer"], "rng": {"torch": extra["torch_rng"]}, "scaler": {}}
            old["python_rng"] = json.loads(json.dumps(extra["python_rng"]))
        except (KeyError, TypeError) as exc:
            raise UserError(f"{ckpt / OLD_TRAINER_FILE} lacks {exc}; delete {out} to train this run again from "
                            "the start, or use another --output-dir") from None
    if old.get("numpy_rng") is None:  # not saved by the earliest versions: NumPy kept its seeded state
        import numpy as np

        np.random.seed(seed)
        old["numpy_rng"] = numpy_rng_json()
    rng = {"python": old["python_rng"], "numpy": old["numpy_rng"], "torch": tensors["rng"]["torch"].tolist()}
    if "cuda" in tensors["rng"]:
        rng["cuda"] = [t.tolist() for t in tensors["rng"]["cuda"]]
    state = EngineState(step=old["step"], epoch=old["epoch"], step_in_epoch=old["batch_in_epoch"],
                        best=old["best_bleu"], best_step=old["best_step"],
                        evals_without_improvement=old["evals_without_improvement"], history=old["history"],
                        finished=old["finished"], train_seconds=old["train_seconds"],
                        elapsed_seconds=old["elapsed_seconds"],
                        extra={"recent": old["recent"], "target_tokens": old["target_tokens"]})
    _rewrite(ckpt, load_file(str(ckpt / "model.safetensors")), tensors["optimizer"], tensors.get("scaler"), rng, state)


def _engine_layout(ckpt: Path) -> bool:
    """Whether ``ckpt`` is in the engine's layout already: an RNG file, or a manifest (which only the engine writes;
    a checkpoint of it that lost its RNG file is damaged, for the engine's resume to fall back from)."""
    return (ckpt / "rng-0.json").is_file() or (ckpt / MANIFEST).is_file()


def upgrade_parser_checkpoint(out: Path, neutral: frozenset, sample: dict) -> None:
    """Rewrite an earlier parser ``checkpoint/`` (its ``config.json`` without the ``neutral`` fields and its
    ``data.json``, or ``sample``, the WSJ sample's description, when it predates ``data.json``, become
    ``settings.json``)."""
    ckpt = out / CHECKPOINT
    if not (ckpt / "tensors.pt").is_file() or _engine_layout(ckpt):
        return
    try:
        saved = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
        old = json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{ckpt} is unreadable ({exc}); delete it to start over, or use another --output-dir") from exc
    data = (json.loads((ckpt / "data.json").read_text(encoding="utf-8")) if (ckpt / "data.json").is_file()
            else sample)
    _record_settings(out, {**saved, "data": data}, neutral)
    tensors = _safe_load(ckpt / "tensors.pt", out)
    rng = {"python": old["python_rng"], "numpy": old["numpy_rng"], "torch": tensors["rng"]["torch"].tolist()}
    if "cuda" in tensors["rng"]:
        rng["cuda"] = [t.tolist() for t in tensors["rng"]["cuda"]]
    state = EngineState(step=old["step"], epoch=old["epoch"], step_in_epoch=old["step_in_epoch"], best=old["best_f1"],
                        best_step=old["best_step"], evals_without_improvement=old["evals_without_improvement"],
                        history=old["history"], finished=old["finished"],
                        train_seconds=sum(old["epoch_train_seconds"]) + old["current_epoch_seconds"],
                        epoch_seconds=old["epoch_train_seconds"], elapsed_seconds=old["elapsed_seconds"],
                        extra={"best_epoch": old["best_epoch"], "current_epoch_seconds": old["current_epoch_seconds"]})
    _rewrite(ckpt, tensors["model"], tensors["optimizer"], tensors.get("scaler"), rng, state)


def upgrade_accelerate_checkpoint(out: Path) -> None:
    """Rewrite the newest ``checkpoint-<step>/`` of the earlier sentence trainer as ``checkpoint/`` (every
    process's RNG state included; the folder then deleted) and record its ``train_config.json`` as settings."""
    import shutil

    from .checkpoint import latest_checkpoint
    from .config import RESULT_NEUTRAL_FIELDS, TrainConfig

    old_dir = latest_checkpoint(out)
    if old_dir is None or (out / CHECKPOINT / "state.json").is_file():
        return
    _record_settings(out, vars(TrainConfig.load(out / "train_config.json")), RESULT_NEUTRAL_FIELDS)
    old = json.loads((old_dir / "trainer_state.json").read_text(encoding="utf-8"))
    state = EngineState(step=old["global_step"], epoch=old["epoch"], step_in_epoch=old["step_in_epoch"],
                        best=old["best_metric"], best_step=old["best_step"], history=old["history"],
                        evals_without_improvement=old["evals_without_improvement"], finished=old["finished"],
                        num_processes=old.get("num_processes", 1), extra={"kernels": old.get("kernels", [])})
    rngs = []
    for rank in range(state.num_processes):
        saved = _safe_load(old_dir / f"random_states_{rank}.pkl", old_dir, numpy_arrays=True)
        kind, keys, *rest = saved["numpy_random_seed"]
        rng = {"python": json.loads(json.dumps(saved["random_state"])), "numpy": [kind, keys.tolist(), *rest],
               "torch": saved["torch_manual_seed"].tolist()}
        if "torch_cuda_manual_seed" in saved:
            rng["cuda"] = [t.tolist() for t in saved["torch_cuda_manual_seed"]]
        rngs.append(rng)
    scaler = _safe_load(old_dir / "scaler.pt", old_dir) if (old_dir / "scaler.pt").is_file() else {}
    from safetensors.torch import load_file

    _rewrite(out / CHECKPOINT, load_file(str(old_dir / "model.safetensors")),
             _safe_load(old_dir / "optimizer.bin", old_dir), scaler, rngs, state)
    shutil.rmtree(old_dir)
