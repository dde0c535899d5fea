"""Public entry points: load a pretrained encoder with structure-aware attention, or add it to a model.

    import structattn
    model = structattn.from_pretrained("bert-base-uncased", task="sequence-classification",
                                       mechanism="sla", m=3, num_labels=2)
    out = model(input_ids=ids, attention_mask=att, structure_mask=mask)   # mask: [batch, T, T] bool
    model.save_pretrained("run/")            # config.json keeps config.structattn, gates in model.safetensors
    model = structattn.from_pretrained("run/", task="sequence-classification")   # same mechanism and gates

The returned object is the usual Hugging Face model class for the task (``BertForSequenceClassification``
...). Its config saves as ``model_type: structattn`` ([`saved_type`][structattn.models.saved_type],
[`auto`][structattn.models.auto]): once ``structattn`` is imported, ``AutoModel*.from_pretrained("run/")`` loads the
folder as this function does; without it, transformers refuses the folder instead of loading the stock model. The
model's ``forward`` lists ``structure_mask`` among its parameters, so ``transformers.Trainer`` keeps that column with
its default arguments ([`StructureDataCollator`][structattn.models.data_collator.StructureDataCollator] builds it).
"""
from __future__ import annotations

import contextlib
import json
import os
import warnings
from typing import Any, Iterator

import torch
from torch import nn

from ..attention.integration import MECHANISM_ATTRS, gate_parameters, install, is_mechanism_parameter, runtime_of, uninstall
from ..attention.mechanisms import MechanismConfig, get_mechanism, option_names
from ..errors import UserError
from ..verbosity import quiet_loading
from .saved_type import base_class_of, mark, unmark
from .saved_version import check_saved_version

#: task name -> transformers Auto class name
TASKS: dict[str, str] = {
    "base": "AutoModel",
    "sequence-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "question-answering": "AutoModelForQuestionAnswering",
    "multiple-choice": "AutoModelForMultipleChoice",
    "masked-lm": "AutoModelForMaskedLM",
    # encoder-decoder models (Marian, BART): the mechanism goes into the encoder's self-attention only
    "translation": "AutoModelForSeq2SeqLM",
}

# Keyword arguments that locate files (used for the config, the model and the gate weights alike).
_HUB_KEYS = ("revision", "cache_dir", "token", "local_files_only", "force_download", "proxies", "subfolder")


def _auto_class(task: str):
    try:
        name = TASKS[task]
    except KeyError:
        raise UserError(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}") from None
    import transformers

    return getattr(transformers, name)


@contextlib.contextmanager
def _quiet_gate_keys(cls) -> Iterator[None]:
    """While loading, do not report saved mechanism weights as unexpected (they are loaded afterwards)."""
    saved = cls.__dict__.get("_keys_to_ignore_on_load_unexpected", None)
    had = "_keys_to_ignore_on_load_unexpected" in cls.__dict__
    current = set(getattr(cls, "_keys_to_ignore_on_load_unexpected", None) or [])
    cls._keys_to_ignore_on_load_unexpected = sorted(current | {rf"\.{attr}\." for attr in MECHANISM_ATTRS})
    try:
        yield
    finally:
        if had:
            cls._keys_to_ignore_on_load_unexpected = saved
        else:
            del cls._keys_to_ignore_on_load_unexpected


def _checkpoint_files(name_or_path: str, hub: dict) -> list[str]:
    """Safetensors files of a checkpoint (local folder or hub name); [] when there are none."""
    sub = hub.get("subfolder") or ""
    if os.path.isdir(name_or_path):
        folder = os.path.join(name_or_path, sub)
        index = os.path.join(folder, "model.safetensors.index.json")
        if os.path.isfile(index):
            with open(index) as fh:
                return sorted({os.path.join(folder, f) for f in json.load(fh)["weight_map"].values()})
        single = os.path.join(folder, "model.safetensors")
        return [single] if os.path.isfile(single) else []
    from transformers.utils import cached_file

    kw = {k: v for k, v in hub.items() if k in _HUB_KEYS}
    # A missing file gives None (no gate weights to find is not an error); anything else is raised.
    common = dict(_raise_exceptions_for_missing_entries=False, _raise_exceptions_for_connection_errors=False)
    index = cached_file(name_or_path, "model.safetensors.index.json", **common, **kw)
    if index:
        with open(index) as fh:
            names = sorted(set(json.load(fh)["weight_map"].values()))
        return [f for f in (cached_file(name_or_path, n, **common, **kw) for n in names) if f]
    single = cached_file(name_or_path, "model.safetensors", **common, **kw)
    return [single] if single else []


def _strip(name: str, prefix: str) -> str:
    return name[len(prefix) + 1:] if prefix and name.startswith(prefix + ".") else name


def load_gate_weights(model: nn.Module, name_or_path: str, **hub: Any) -> list[str]:
    """Copy saved mechanism weights (gates ``*.structattn_gate.*``, concat projections, Gaussian biases, in the
    checkpoint's safetensors) into ``model``.

    Keys match with or without the base-model prefix (``bert.`` ...), so gates saved from a task model load
    into the base model and back. Returns the names of the parameters that were loaded.
    """
    wanted = {n: p for n, p in model.named_parameters() if is_mechanism_parameter(n)}
    if not wanted:
        return []
    prefix = getattr(model, "base_model_prefix", "") or ""
    by_key = {_strip(n, prefix): n for n in wanted}
    loaded = []
    from safetensors import safe_open

    for path in _checkpoint_files(name_or_path, hub):
        with safe_open(path, framework="pt") as fh:
            for key in fh.keys():
                if not is_mechanism_parameter(key):
                    continue
                target = by_key.get(_strip(key, prefix))
                if target is None:
                    continue
                tensor = fh.get_tensor(key)
                param = wanted[target]
                if tensor.shape != param.shape:
                    warnings.warn(f"structattn: saved gate {key} has shape {tuple(tensor.shape)} but the model's "
                                  f"{target} has {tuple(param.shape)} (another gate kind); keeping the new "
                                  "initialisation", UserWarning, stacklevel=2)
                    continue
                with torch.no_grad():
                    param.copy_(tensor.to(dtype=param.dtype, device=param.device))
                loaded.append(target)
    return loaded


@quiet_loading()
def from_pretrained(name_or_path: str, task: str = "base", mechanism: str | MechanismConfig | dict | None = None,
                    **options: Any) -> nn.Module:
    """Load a pretrained encoder for ``task`` with structure-aware attention.

    Args:
        name_or_path: a Hugging Face model name or folder (a stock checkpoint or one saved by structattn).
        task: ``base`` | ``sequence-classification`` | ``token-classification`` | ``question-answering`` |
            ``multiple-choice`` | ``masked-lm`` | ``translation`` (an encoder-decoder model such as MarianMT or
            BART: the mechanism goes into the encoder's self-attention only).
        mechanism: a name of `structattn.attention.MECHANISMS` (``sla``, ``wla``, ``hybrid``, ``sdoi``,
            ``global``, ``local``, ``hybrid_concat``, ``gauss_luong``, ``gauss_sperber``, ``gauss_yang``) or a
            [`MechanismConfig`][structattn.attention.mechanisms.MechanismConfig]. None: the mechanism saved in the
            checkpoint, or ``sla``.
        options: mechanism options (fields of [`MechanismConfig`][structattn.attention.mechanisms.MechanismConfig]:
            ``m``, ``k``, ``window_unit``, ``layers``, ``gate``, ``gate_bias``, ``gate_has_bias``, ``gate_init_std``,
            ``kernel``, ``base``, ``relation``, ``mix``, ``gaussian``, ``gaussian_window``); every other
            keyword goes to transformers' ``from_pretrained`` (``num_labels``, ``dtype``, ``revision`` ...).

    Returns:
        The transformers model for the task with every pretrained weight lifted; the mechanism's own weights
        (gates, concat projections, Gaussian biases) are loaded from the checkpoint when it was saved with the
        same mechanism (and gate kind), and initialised otherwise.
    """
    mech_opts = {k: options.pop(k) for k in list(options) if k in option_names()}
    hub = {k: options[k] for k in _HUB_KEYS if k in options}
    if "attn_implementation" in options:
        raise UserError("pass base='sdpa' or base='eager' instead of attn_implementation "
                        "(structattn sets the attention implementation itself)")
    config = options.pop("config", None)   # a config already read (an Auto class passes the one it read)
    if config is not None:
        model_kwargs = dict(options)
    else:
        config, model_kwargs = _read_config(name_or_path, options)
    saved = getattr(config, "structattn", None)
    if isinstance(saved, dict) and (mechanism is None or mechanism == saved.get("name")):
        mech = MechanismConfig.from_dict(saved).replace(**mech_opts)
    else:
        mech = get_mechanism(mechanism or "sla", **mech_opts)
    for key in _HUB_KEYS:
        if key in hub:
            model_kwargs[key] = hub[key]
    cls = _model_class(task, config)
    with _quiet_gate_keys(cls):
        try:
            model = cls.from_pretrained(name_or_path, config=config, attn_implementation=mech.base, **model_kwargs)
        except OSError as exc:  # e.g. a folder with config.json but no weights
            raise UserError(_load_error(name_or_path, exc)) from exc
    _install_marked(model, mech)
    if isinstance(saved, dict) and saved.get("name") == mech.name:
        loaded = set(load_gate_weights(model, name_or_path, **hub))
        fresh = [n for n, _ in model.named_parameters() if is_mechanism_parameter(n) and n not in loaded]
        if fresh:
            warnings.warn(f"structattn: {name_or_path} was saved with mechanism {mech.name!r} but holds no saved "
                          f"value for {len(fresh)} gate parameter(s) (e.g. {fresh[0]}); they start from the "
                          "initialisation", UserWarning, stacklevel=2)
    return model


@quiet_loading()
def load_as_saved(name_or_path: str, task: str = "base", **options: Any) -> nn.Module:
    """The model of ``task`` as the checkpoint was saved: with its mechanism and gates when it has one
    ([`from_pretrained`][structattn.models.encoder.from_pretrained]), else the stock model, even from a folder that the
    Auto classes refuse (``base``: the encoder part of an SG-Net model; ``translation``: a DeepNet model, whose
    residual weights its loader adds). ``options`` go to transformers' ``from_pretrained``."""
    config, model_kwargs = _read_config(name_or_path, options)
    if isinstance(getattr(config, "structattn", None), dict):
        return from_pretrained(name_or_path, task=task, config=config, **model_kwargs)
    try:
        return _model_class(task, config).from_pretrained(name_or_path, config=unmark(config), **model_kwargs)
    except OSError as exc:
        raise UserError(_load_error(name_or_path, exc)) from exc


def _read_config(name_or_path: str, options: dict) -> tuple[Any, dict]:
    """(config, the options it did not take) of a checkpoint; a missing one, or a folder an earlier structattn
    wrote, is one line."""
    from transformers import AutoConfig

    check_saved_version(name_or_path)
    try:
        return AutoConfig.from_pretrained(name_or_path, return_unused_kwargs=True, **options)
    except OSError as exc:
        raise UserError(_load_error(name_or_path, exc)) from exc


def _load_error(name_or_path: str, exc: OSError) -> str:
    return (f"cannot load a model from {name_or_path!r}: {exc} Give a folder holding config.json and the weights "
            "(model.safetensors or pytorch_model.bin), e.g. the best/ folder of a `structattn train` run, or a "
            "Hugging Face model name (needs network access or a filled Hugging Face cache).")


def _model_class(task: str, config):
    """The concrete transformers class of ``task`` for ``config`` (``BertForSequenceClassification`` ...): the
    Auto class itself where it has none (it then refuses ``config`` with transformers' own message)."""
    auto_cls = _auto_class(task)
    return auto_cls._model_mapping.get(base_class_of(config), auto_cls)


def _install_marked(model: nn.Module, mechanism: MechanismConfig | str | dict, **options: Any) -> nn.Module:
    """Install the mechanism and mark the config (it then saves as ``model_type: structattn``)."""
    install(model, mechanism, **options)
    mark(model.config)
    return model


def model_from_config(config, task: str = "base", **kwargs: Any) -> nn.Module:
    """A freshly initialised model of ``task`` from a config, with the mechanism the config records
    (``config.structattn``) installed: what ``AutoModel*.from_config`` gives for a structure-aware config."""
    saved = getattr(config, "structattn", None)
    mech = MechanismConfig.from_dict(saved) if isinstance(saved, dict) else None
    if mech is not None:
        kwargs.setdefault("attn_implementation", mech.base)
    model = _model_class(task, config)._from_config(config, **kwargs)
    return _install_marked(model, mech) if mech is not None else model


def apply_mechanism(model: nn.Module, mechanism: str | MechanismConfig | dict = "sla", **options: Any) -> nn.Module:
    """Add structure-aware attention to a model you already have (in place; returns it).

    Same mechanisms and options as [`from_pretrained`][structattn.models.encoder.from_pretrained]. Calling it again
    replaces the mechanism.
    """
    return _install_marked(model, mechanism, **options)


def remove_mechanism(model: nn.Module) -> nn.Module:
    """Undo [`apply_mechanism`][structattn.models.encoder.apply_mechanism]: the model runs its stock attention again
    (gates are deleted) and saves as its stock type."""
    uninstall(model)
    unmark(model.config)
    return model


def mechanism_of(model: nn.Module) -> MechanismConfig | None:
    """The mechanism installed in ``model`` (None if none)."""
    rt = runtime_of(model)
    return None if rt is None else rt.mechanism


def mechanism_overrides(cfg) -> dict:
    """The mechanism options a run's config sets (``m``, ``k``, ``gate_bias``; None = the mechanism's default),
    as `from_pretrained` takes them."""
    return {k: v for k, v in {"m": cfg.m, "k": cfg.k, "gate_bias": cfg.gate_bias}.items() if v is not None}


__all__ = ["TASKS", "apply_mechanism", "from_pretrained", "gate_parameters", "load_as_saved", "load_gate_weights",
           "mechanism_of", "model_from_config", "remove_mechanism"]
