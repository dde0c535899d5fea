"""What the trainers need to run SG-Net: the model from a `TrainConfig`, the SG layer's
structure (relation ``sdoi``) and a collator that adds its mask.

The SG layer's mask rules (the paper, footnotes 4 and 9): a word sees itself and its dependency ancestors in its
own sentence, never the other segment; special tokens and padding see only themselves, and their SG outputs are
not aggregated (they keep the encoder's output). Heads that read the first token ([CLS]: classification, multiple
choice) pool it from the aggregated output; under the paper's rule that token would keep the encoder's output, so
the SG layer could never reach the head. For those heads the special tokens' rows see every real token instead
(``special_rows="all"``, what the official code's uniform rows amount to) and every real token's SG output is
aggregated. Even so, one SG layer cannot bring *syntax* to [CLS] (its row is an unmasked re-reading of the encoder
output); ``pool="mean"`` or, for multiple choice, ``pool="option"``
([`SGNetConfig`][structattn.sgnet.model.SGNetConfig]) makes those heads read the mean of the aggregated tokens (all of
them, or the option's) instead, and then the paper's rules hold for every head.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ..structure.expand import PAD, ExpansionRules, token_mask
from ..structure.spec import StructureSpec

#: task kinds (`structattn.tasks.base.KINDS`) whose SG-Net head has another name
KIND_HEADS = {"regression": "classification"}

#: What ``--model-parts`` keeps of a saved SG-Net folder given as ``--model``: all of it, or its encoder only.
from .names import MODEL_PARTS  # noqa: E402  (re-exported)


def sg_layer_masked(sgnet: str) -> bool:
    """Whether the SG layer of aggregation ``sgnet`` reads a mask (an SDOI structure per input): every aggregation
    but ``none`` (no SG layer) and ``vanilla`` (the layer without a mask)."""
    return sgnet not in ("none", "vanilla")


def sg_head(head: str) -> str:
    """The SG-Net head (`SGNET_HEADS`) of a head name or task kind."""
    return KIND_HEADS.get(head, head)


def sg_rules(head: str, pool: str = "first") -> ExpansionRules:
    """The SG layer's expansion rules for a head (or task kind) and its pooling (module docstring)."""
    from .model import SGNetModel

    if SGNetModel.head_class(sg_head(head)).pooled and pool == "first":
        return ExpansionRules.for_relation("sdoi", special_rows="all")
    return ExpansionRules.for_relation("sdoi")


def sg_structure_spec(head: str, pool: str = "first") -> StructureSpec:
    """The SG layer's structure: relation ``sdoi`` with `sg_rules`."""
    return StructureSpec(relation="sdoi", options={}, rules=sg_rules(head, pool))


def sg_tensors(features: Sequence[dict], T: int, rules: ExpansionRules) -> tuple[torch.Tensor, torch.Tensor]:
    """``sg_mask`` ``[B, T, T]`` bool from each feature's ``sg_structure`` and ``sg_tokens`` ``[B, T]`` bool
    (the positions whose SG output is aggregated: word tokens, and every real token when special rows see all)."""
    B = len(features)
    tw = np.full((B, T), PAD, dtype=np.int64)
    for b, f in enumerate(features):
        tw[b, :len(f["token_word"])] = f["token_word"]
    masks = np.empty((B, T, T), dtype=bool)
    for b, f in enumerate(features):
        masks[b] = token_mask(f["sg_structure"], tw[b], rules)
    keep = tw != PAD if rules.special_rows == "all" else tw >= 0
    return torch.from_numpy(masks), torch.from_numpy(keep)


class SGMaskCollator:
    """Wraps a collator and adds ``sg_mask`` / ``sg_tokens`` (`sg_tensors`) for the features' T.

    ``options=True``: features are questions holding ``options`` (multiple choice); the tensors get the base
    batch's ``[B, C, T(, T)]`` shape.
    """

    def __init__(self, base, rules: ExpansionRules, *, options: bool = False):
        self.base, self.rules, self.options = base, rules, options

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.base(features)
        T = batch["input_ids"].shape[-1]
        if not self.options:
            batch["sg_mask"], batch["sg_tokens"] = sg_tensors(features, T, self.rules)
            return batch
        flat = [option for f in features for option in f["options"]]
        mask, keep = sg_tensors(flat, T, self.rules)
        B, C = batch["input_ids"].shape[:2]
        batch["sg_mask"], batch["sg_tokens"] = mask.view(B, C, T, T), keep.view(B, C, T)
        return batch


def is_sgnet_folder(path: str) -> bool:
    """Whether ``path`` is a folder saved by `SGNetModel.save_pretrained` (its config names SG-Net)."""
    import json
    from pathlib import Path

    from .model import CONFIG_KEY

    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        return CONFIG_KEY in json.loads(config.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


def load_sgnet_and_tokenizer(cfg, head: str, num_labels: int, model_path: str | None = None):
    """An [`SGNetModel`][structattn.sgnet.model.SGNetModel] for ``head`` and its fast tokenizer.

    A folder saved by SG-Net with this head is loaded as it was saved (the run's own ``best/``). A folder saved
    by SG-Net with another head (a SQuAD model given to a multiple-choice run: intermediate-task transfer) gives
    its encoder, mechanism included; the SG part and the head are built fresh from ``cfg``. Anything else is an
    encoder (a Hugging Face name or folder, "" = the offline default) that gets the configuration's mechanism
    inside and the SG part and head on top (``cfg.sgnet`` ``none`` = the head alone: the baseline). With
    ``cfg.model_parts == "encoder"`` a saved SG-Net folder of the same head gives its encoder only, as across heads
    (SG-Net added to a reader's trained encoder, the baseline on the same encoder with a fresh head); a folder of
    the same head loaded whole must have the configuration's ``sgnet`` aggregation. ``head`` is a
    task kind (``classification``, ``regression``, ``tagging``) or ``span_qa`` / ``multiple_choice``.
    """
    from ..errors import UserError
    from .model import SGNetConfig, SGNetModel
    from ..settings import default_encoder
    from ..models.encoder import mechanism_overrides
    from ..models.tokenizer import load_tokenizer

    name = model_path or cfg.model or default_encoder()
    sg = SGNetConfig(aggregation=cfg.sgnet, alpha=cfg.sgnet_alpha, init=cfg.sgnet_init,
                     head=sg_head(head), num_labels=num_labels,
                     pool=cfg.pool)
    parts = getattr(cfg, "model_parts", "all")
    if parts not in MODEL_PARTS:
        raise UserError(f"unknown --model-parts {parts!r}; valid: {', '.join(MODEL_PARTS)}")
    if is_sgnet_folder(name):
        model = SGNetModel.from_pretrained(name)
        # model_path is the run's own best/ (evaluation): always as saved
        if model.config.head != sg.head or (parts == "encoder" and model_path is None):
            model = _transfer_encoder(model, sg, cfg, name)
        elif model.config.aggregation != sg.aggregation:
            raise UserError(f"{name} was saved with --sgnet {model.config.aggregation}; this run asks for --sgnet "
                            f"{sg.aggregation}. Pass --sgnet {model.config.aggregation} to go on training it as "
                            f"saved, or --model-parts encoder to keep only its encoder (the SG part and the head "
                            f"start fresh)")
    elif parts == "encoder" and model_path is None:
        raise UserError(f"--model-parts encoder keeps the encoder of a saved SG-Net or reader folder; {name} is "
                        f"not one (its config.json does not name SG-Net). A plain encoder already gets a fresh SG "
                        f"part and head: leave --model-parts at all")
    else:
        model = SGNetModel.from_encoder(name, sg, mechanism=cfg.mechanism, **mechanism_overrides(cfg))
    return model, load_tokenizer(name, model.base_model.config.model_type)


def _transfer_encoder(saved, sg, cfg, name: str):
    """A fresh SG part and ``sg.head`` on the encoder of ``saved`` (an SG-Net model trained for another head, or
    any SG-Net model under ``--model-parts encoder``)."""
    from ..errors import UserError
    from ..models.encoder import mechanism_of
    from .model import SGNetModel
    from ..train.config import mechanism_options

    encoder = saved.base_model
    installed = mechanism_of(encoder)
    mechanism = installed.name if installed is not None else "global"
    if mechanism != cfg.mechanism:
        raise UserError(f"{name} is a {saved.config.head} model whose encoder has the {mechanism!r} mechanism; this "
                        f"run asks for {cfg.mechanism!r}. A transferred encoder keeps its mechanism: pass "
                        f"--mechanism {mechanism}, or start from a plain encoder")
    # as the mechanism runs them: a saved m=None is the mechanism's default m
    resolved = (mechanism_options(mechanism, installed.m, installed.k) if installed is not None
                else mechanism_options(mechanism))
    for option in ("m", "k"):  # options given on the command line must be the ones the encoder was trained with
        asked, saved_value = getattr(cfg, option), resolved[option]
        if asked is not None and asked != saved_value:
            raise UserError(f"{name}: its encoder's {mechanism} mechanism has {option}={saved_value}; this run asks "
                            f"for {option}={asked}. A transferred encoder keeps its mechanism: drop --{option}"
                            + (f" or pass --{option} {saved_value}" if saved_value is not None else ""))
    print(f"{name}: a {saved.config.head} model; its encoder ({mechanism} attention) is kept, the SG part "
          f"({sg.aggregation}) and the {sg.head} head start fresh")
    return SGNetModel(encoder.train(), sg)
