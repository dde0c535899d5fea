"""The stock attention a mechanism builds on: which base (``sdpa`` or ``eager``) a model's config names, and the
stock attention function of that base for an attention module."""
from __future__ import annotations

import sys

from torch import nn


def config_base(config) -> str:
    settings = getattr(config, "structattn", None)
    if isinstance(settings, dict) and settings.get("base") in ("sdpa", "eager"):
        return settings["base"]
    return "sdpa"


def stock_function(module: nn.Module, base: str):
    """The stock attention function: HF's SDPA wrapper or the model file's own eager function."""
    if base == "sdpa":
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward
    fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if fn is None:
        from transformers.models.bert.modeling_bert import eager_attention_forward as fn
    return fn
