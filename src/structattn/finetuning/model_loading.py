"""Loading the model and tokenizer a run trains: the encoder with its mechanism and a task head, and the fast
tokenizer that takes pre-split words (shared by the sentence, reading and multiple-choice trainers)."""
from __future__ import annotations

import torch

from ..errors import UserError


def model_task_name(kind: str) -> str:
    return {"classification": "sequence-classification", "regression": "sequence-classification",
            "tagging": "token-classification"}[kind]


def mechanism_overrides(cfg) -> dict:
    """The mechanism options a run's config sets (``m``, ``k``, ``gate_bias``; None = the mechanism's default)."""
    return {k: v for k, v in {"m": cfg.m, "k": cfg.k, "gate_bias": cfg.gate_bias}.items() if v is not None}


BYTE_LEVEL_TYPES = ("roberta", "longformer", "bart", "gpt2")  # XLM-R is SentencePiece: no prefix space


def load_model_and_tokenizer(cfg, task, model_path: str | None = None):
    """The task model with the configured mechanism, and its fast tokenizer."""
    from ..models.encoder import from_pretrained
    from ..settings import default_encoder

    name = model_path or cfg.model or default_encoder()
    kwargs = {}
    if task.kind == "regression":
        kwargs.update(num_labels=1, problem_type="regression")
    else:
        kwargs.update(num_labels=task.num_labels)
        if task.label_list:
            kwargs["id2label"] = dict(enumerate(task.label_list))
            kwargs["label2id"] = {lab: i for i, lab in enumerate(task.label_list)}
    # float32 weights whatever dtype the checkpoint was stored in (transformers v5 keeps the stored one): the
    # optimiser updates them, and --precision decides what the products run in
    model = from_pretrained(name, task=model_task_name(task.kind), mechanism=cfg.mechanism,
                            **mechanism_overrides(cfg), dtype=torch.float32, **kwargs)
    return model, load_tokenizer(name, model.config.model_type)


def load_tokenizer(name: str, model_type: str):
    """The fast tokenizer of a model name or folder (byte-level BPE ones with a prefix space, so that they
    take pre-split words)."""
    from transformers import AutoTokenizer

    extra = {"add_prefix_space": True} if model_type in BYTE_LEVEL_TYPES else {}
    try:
        return AutoTokenizer.from_pretrained(name, use_fast=True, **extra)
    except OSError as exc:
        raise UserError(f"cannot load a tokenizer from {name!r}: {exc}") from exc
