"""Tokenising pre-split words and aligning sub-word tokens to words.

Any Hugging Face *fast* tokenizer works (WordPiece, byte-level BPE, SentencePiece):
the alignment comes from ``word_ids()`` and ``sequence_ids()``, never from
string matching. Inputs longer than ``max_length`` become several overlapping
windows (``stride`` tokens of overlap); every word appears in at least one window.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import UserError
from .expand import SPECIAL


@dataclass
class EncodedWindow:
    """One window of an encoded example (lists are unpadded, length T).

    Attributes:
        input_ids, attention_mask, token_type_ids: as the tokenizer returns them
            (``token_type_ids`` None for models without them).
        token_word: ``[T]`` int32, global word index (segment 0 words first) or -1 for special tokens.
        example_index: which input example this window came from.
    """

    input_ids: list[int]
    attention_mask: list[int]
    token_type_ids: list[int] | None
    token_word: np.ndarray
    example_index: int


def check_fast_tokenizer(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"{type(tokenizer).__name__} is not a fast tokenizer; structattn aligns sub-words to "
                        "words through word_ids(), which only fast tokenizers provide. Load it with "
                        "AutoTokenizer.from_pretrained(name, use_fast=True).")


def _repair_empty_words(tokenizer, words: list[str], where: str) -> list[str]:
    """Replace words the tokenizer maps to no token by its unknown token.

    A word with no token would lose its place in the mask and its label, so it is
    replaced (and a warning is given) rather than dropped.
    """
    if not words:
        return words
    enc = tokenizer(words, is_split_into_words=True, add_special_tokens=False)
    seen = set(w for w in enc.word_ids() if w is not None)
    missing = [i for i in range(len(words)) if i not in seen]
    if not missing:
        return words
    unk = tokenizer.unk_token
    if unk is None:
        raise UserError(f"{where}: words {[words[i] for i in missing]!r} give no token with this tokenizer "
                        "and it has no unknown token to stand in for them; clean the input text.")
    warnings.warn(f"{where}: {len(missing)} word(s) map to no sub-word token ({[words[i] for i in missing]!r}); "
                  f"replaced by {unk!r}", stacklevel=3)
    fixed = list(words)
    for i in missing:
        fixed[i] = unk
    return fixed


def encode_words(tokenizer, words_a: Sequence[str], words_b: Sequence[str] | None = None, *,
                 max_length: int = 128, stride: int = 32, example_index: int = 0,
                 where: str = "") -> list[EncodedWindow]:
    """Encode one example given as words; split it into windows if it is too long.

    Args:
        tokenizer: a fast Hugging Face tokenizer (byte-level BPE ones need ``add_prefix_space=True``).
        words_a: the first segment's words (N_a).
        words_b: the second segment's words (N_b), or None.
        max_length: tokens per window including special tokens.
        stride: overlapping tokens between consecutive windows.
    Returns:
        one or more windows; ``token_word`` indexes words 0..N_a-1 then N_a..N_a+N_b-1.
    """
    check_fast_tokenizer(tokenizer)
    where = where or f"example {example_index}"
    if len(words_a) == 0 or (words_b is not None and len(words_b) == 0):
        raise UserError(f"{where}: a segment has no words")
    words_a = _repair_empty_words(tokenizer, list(words_a), where)
    if words_b is not None:
        words_b = _repair_empty_words(tokenizer, list(words_b), where)
    n_a = len(words_a)
    room = max_length - tokenizer.num_special_tokens_to_add(pair=words_b is not None)
    if stride < 0 or stride >= room:
        raise UserError(f"stride={stride} must be >= 0 and smaller than the {room} non-special tokens a window of "
                        f"max_length={max_length} holds; lower the stride or raise max_length")
    kwargs = dict(is_split_into_words=True, max_length=max_length, stride=stride,
                  return_overflowing_tokens=True, return_token_type_ids=True)
    if words_b is None:
        enc = tokenizer(words_a, truncation=True, **kwargs)
    else:
        # Overflowing windows need a single segment to slide over: slide over the longer one.
        len_a = len(tokenizer(words_a, is_split_into_words=True, add_special_tokens=False)["input_ids"])
        len_b = len(tokenizer(words_b, is_split_into_words=True, add_special_tokens=False)["input_ids"])
        strategy = "only_second" if len_b >= len_a else "only_first"
        try:
            enc = tokenizer(words_a, words_b, truncation=strategy, **kwargs)
        except Exception as exc:  # the tokenizer raises when the kept segment alone is too long
            raise UserError(f"{where}: the pair does not fit in {max_length} tokens even with one segment "
                            f"windowed ({len_a} + {len_b} sub-words): {exc}") from exc
    has_types = "token_type_ids" in enc and getattr(tokenizer, "model_input_names", None) and \
        "token_type_ids" in tokenizer.model_input_names
    windows = []
    for w in range(len(enc["input_ids"])):
        word_ids = enc.word_ids(w)
        seq_ids = enc.sequence_ids(w)
        tw = np.full(len(word_ids), SPECIAL, dtype=np.int32)
        for t, (wid, sid) in enumerate(zip(word_ids, seq_ids)):
            if wid is not None and sid is not None:
                tw[t] = wid + (n_a if sid == 1 else 0)
        windows.append(EncodedWindow(
            input_ids=list(enc["input_ids"][w]),
            attention_mask=list(enc["attention_mask"][w]),
            token_type_ids=list(enc["token_type_ids"][w]) if has_types else None,
            token_word=tw, example_index=example_index))
    covered = set(int(x) for win in windows for x in win.token_word if x >= 0)
    n_total = n_a + (len(words_b) if words_b is not None else 0)
    if len(covered) != n_total:  # pragma: no cover - a tokenizer bug, not user input
        lost = sorted(set(range(n_total)) - covered)
        raise RuntimeError(f"{where}: words {lost} are in no window; please report this with the tokenizer name")
    return windows


def first_subword_positions(token_word: np.ndarray) -> np.ndarray:
    """``[T]`` bool: the token is the first sub-word of its word in this window (labels go there)."""
    token_word = np.asarray(token_word)
    first = token_word >= 0
    first[1:] &= token_word[1:] != token_word[:-1]
    return first
