"""The fast tokenizer of a model name or folder, set to take pre-split words (what every fine-tuning family and
the reader tokenise with)."""
from __future__ import annotations

from ..errors import UserError

BYTE_LEVEL_TYPES = ("roberta", "longformer", "bart", "gpt2")  # XLM-R is SentencePiece: no prefix space


def load_tokenizer(name: str, model_type: str):
    """The fast tokenizer of a model name or folder (byte-level BPE ones with a prefix space, so that they
    take pre-split words)."""
    from transformers import AutoTokenizer

    extra = {"add_prefix_space": True} if model_type in BYTE_LEVEL_TYPES else {}
    try:
        return AutoTokenizer.from_pretrained(name, use_fast=True, **extra)
    except OSError as exc:
        raise UserError(f"cannot load a tokenizer from {name!r}: {exc}") from exc
