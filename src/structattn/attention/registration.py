"""Registration of ``"structattn"`` with transformers' attention interface
(`structattn_attention`) and attention-mask interface (`structattn_mask`:
the stock mask of the model's base; without it the padding mask would be dropped). Importing this module registers
both."""
from __future__ import annotations

from typing import Any

from .dispatch import structattn_attention
from .names import ATTENTION_NAME
from .stock import config_base

_registered = False


def structattn_mask(*args: Any, **kwargs: Any):
    """Mask function registered as ``"structattn"``: the stock ``sdpa`` (bool) or ``eager`` (additive float)
    mask, whichever the model's ``config.structattn["base"]`` names."""
    from transformers.masking_utils import eager_mask, sdpa_mask

    fn = eager_mask if config_base(kwargs.get("config")) == "eager" else sdpa_mask
    return fn(*args, **kwargs)


def register() -> None:
    """Register ``"structattn"`` with transformers' attention and attention-mask interfaces (idempotent)."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, structattn_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, structattn_mask)
    _registered = True


register()
