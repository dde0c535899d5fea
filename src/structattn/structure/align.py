"""Tokenising pre-split words and aligning sub-word tokens to words.

Any Hugging Face *fast* tokenizer works (WordPiece, byte-level BPE, SentencePiece):
the alignment comes from ``word_ids()`` and ``sequence_ids()``, never from
string matching.

Inputs longer than ``max_length`` are handled one of two ways (``long_inputs``):

- ``"truncate"`` (the papers' choice, as BERT's ``run_glue``): one window; a pair loses
  tokens from its longer segment first (``longest_first``), a single segment loses its end.
  The cut may fall inside a word; the kept pieces of that word still map to it.
- ``"windows"``: overlapping windows over whole words. A window never starts inside a word;
  consecutive windows share the longest run of whole words that holds at most ``stride``
  sub-words (the overlap is rounded down to word boundaries). In a pair, the longer segment
  slides and the other is repeated in every window; the sliding one gets at least half of each
  window and the repeated one is cut at its end where it does not fit beside it. A single word
  longer than a whole window gets a window of its own holding its first sub-words, so every
  word of the sliding segment has its first sub-word in some window. Cut sub-words are counted
  (``EncodedWindow.dropped_tokens``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import UserError
from .expand import SPECIAL

LONG_INPUTS = ("truncate", "windows")


@dataclass
class EncodedWindow:
    """One window of an encoded example (lists are unpadded, length T).

    Attributes:
        input_ids, attention_mask, token_type_ids: as the tokenizer returns them
            (``token_type_ids`` None for models without them).
        token_word: ``[T]`` int32, global word index (segment 0 words first) or -1 for special tokens.
        example_index: which input example this window came from.
        example_length: tokens the whole example needs as one sequence (special tokens included);
            more than ``max_length`` means it was truncated or split.
        dropped_tokens: sub-word tokens of the example that are in none of its windows.
    """

    input_ids: list[int]
    attention_mask: list[int]
    token_type_ids: list[int] | None
    token_word: np.ndarray
    example_index: int
    example_length: int
    dropped_tokens: int


def check_fast_tokenizer(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"{type(tokenizer).__name__} is not a fast tokenizer; structattn aligns sub-words to "
                        "words through word_ids(), which only fast tokenizers provide. Load it with "
                        "AutoTokenizer.from_pretrained(name, use_fast=True).")


def check_long_inputs(long_inputs: str) -> None:
    if long_inputs not in LONG_INPUTS:
        raise UserError(f"long_inputs={long_inputs!r} is not valid; choose truncate (cut at max_length, the "
                        "papers' choice) or windows (overlapping windows over whole words): "
                        "--long-inputs truncate|windows")


def token_counts(tokenizer, word_lists: Sequence[list[str]]) -> list[np.ndarray]:
    """Per word list, ``[N]`` int: sub-words of each word in the un-truncated encoding, without special tokens
    (one batched call)."""
    if not word_lists:
        return []
    # verbose=False: a long example is measured here, never fed to the model whole
    enc = tokenizer(list(word_lists), is_split_into_words=True, add_special_tokens=False, verbose=False)
    return [np.bincount([w for w in enc.word_ids(i) if w is not None], minlength=len(words))
            for i, words in enumerate(word_lists)]


def repair_words(tokenizer, words: list[str], counts: np.ndarray, where: str) -> tuple[list[str], np.ndarray]:
    """Words that give no sub-word (``counts[i] == 0``, ``counts`` from `token_counts`) replaced by the unknown
    token; returns the words to tokenise and their ``[N]`` counts.

    A word with no token would lose its place in the mask and its label, so it is replaced (and a warning names
    it and ``where``) rather than dropped; a tokenizer without an unknown token is a UserError.
    """
    missing = np.nonzero(counts == 0)[0].tolist()
    if not missing:
        return words, counts
    unk = tokenizer.unk_token
    if unk is None:
        raise UserError(f"{where}: words {[words[i] for i in missing]!r} give no token with this tokenizer "
                        "and it has no unknown token to stand in for them; clean the input text.")
    warnings.warn(f"{where}: {len(missing)} word(s) map to no sub-word token ({[words[i] for i in missing]!r}); "
                  f"replaced by {unk!r}", stacklevel=3)
    fixed = list(words)
    for i in missing:
        fixed[i] = unk
    return fixed, token_counts(tokenizer, [fixed])[0]


def word_windows(counts: np.ndarray, room: int, stride: int) -> list[tuple[int, int]]:
    """Word ranges ``[start, end)`` of overlapping windows that never start inside a word.

    Args:
        counts: ``[N]`` sub-words per word (each >= 1).
        room: sub-words a window holds.
        stride: most sub-words two consecutive windows share; the shared part is the longest
            run of whole words that fits in it (possibly none).
    Returns:
        ranges in order, together covering every word. A range holds at most ``room``
        sub-words, except a range of one word longer than ``room`` (its own window).
    """
    cum = np.concatenate([[0], np.cumsum(counts)])
    n = len(counts)

    def size(start: int, end: int) -> int:
        return int(cum[end] - cum[start])

    ranges = []
    start = 0
    while True:
        end = start + 1
        while end < n and size(start, end + 1) <= room:
            end += 1
        ranges.append((start, end))
        if end == n:
            return ranges
        # Step back over whole words while the overlap fits in the stride and the next
        # window still reaches the first word this one could not hold (so it adds a word).
        nxt = end
        while nxt - 1 > start and size(nxt - 1, end) <= stride and size(nxt - 1, end + 1) <= room:
            nxt -= 1
        start = nxt


def encode_words(tokenizer, words_a: Sequence[str], words_b: Sequence[str] | None = None, *,
                 max_length: int = 128, stride: int = 32, long_inputs: str = "truncate",
                 example_index: int = 0, where: str = "") -> list[EncodedWindow]:
    """Encode one example given as words; truncate it or split it into windows if it is too long.

    Args:
        tokenizer: a fast Hugging Face tokenizer (byte-level BPE ones need ``add_prefix_space=True``).
        words_a: the first segment's words (N_a).
        words_b: the second segment's words (N_b), or None.
        max_length: tokens per window including special tokens.
        stride: ``"windows"`` only: most sub-words shared by consecutive windows.
        long_inputs: ``"truncate"`` or ``"windows"`` (module docstring).
    Returns:
        one window (always, under ``"truncate"``) or more; ``token_word`` indexes words
        0..N_a-1 then N_a..N_a+N_b-1.
    """
    check_fast_tokenizer(tokenizer)
    check_long_inputs(long_inputs)
    where = where or f"example {example_index}"
    segments = [list(words_a)] + ([list(words_b)] if words_b is not None else [])
    if any(len(seg) == 0 for seg in segments):
        raise UserError(f"{where}: a segment has no words")
    repaired = [repair_words(tokenizer, seg, counts, where)
                for seg, counts in zip(segments, token_counts(tokenizer, segments))]
    segments = [words for words, _ in repaired]
    counts = [c for _, c in repaired]
    room = max_length - tokenizer.num_special_tokens_to_add(pair=len(segments) == 2)
    if room < len(segments):
        raise UserError(f"max_length={max_length} leaves no room for the words of every segment next to the "
                        "special tokens; raise max_length")
    if long_inputs == "windows" and not 0 <= stride < room:
        raise UserError(f"stride={stride} must be >= 0 and smaller than the {room} non-special tokens a window of "
                        f"max_length={max_length} holds; lower the stride or raise max_length")
    total = sum(int(c.sum()) for c in counts)
    if total <= room:
        plans = [(segments, [0] * len(segments), False)]
    elif long_inputs == "truncate":
        # longest_first: a pair loses tokens from its longer segment first (BERT's run_glue).
        plans = [(segments, [0] * len(segments), "longest_first")]
    else:
        plans = _window_plans(segments, counts, room, stride)
    n_a = len(segments[0])
    encoded = [_encode(tokenizer, segs, offsets, n_a, max_length, truncation)
               for segs, offsets, truncation in plans]
    dropped = total - _kept_tokens([tw for *_, tw in encoded])
    if long_inputs == "windows" and len(segments) == 1:  # tagging needs every word in some window
        lost = sorted(set(range(n_a)) - set(int(x) for *_, tw in encoded for x in tw))
        if lost:  # pragma: no cover - a tokenizer bug
            raise RuntimeError(f"{where}: words {lost} are in no window; please report this with the tokenizer name")
    return [EncodedWindow(input_ids=ids, attention_mask=mask, token_type_ids=types, token_word=tw,
                          example_index=example_index, example_length=total + max_length - room,
                          dropped_tokens=dropped)
            for ids, mask, types, tw in encoded]


def _window_plans(segments, counts, room, stride):
    """(segments, word offsets, truncation) per window: the longer segment slides, the other is repeated."""
    slide = 1 if len(segments) == 2 and counts[1].sum() >= counts[0].sum() else 0
    other = int(counts[1 - slide].sum()) if len(segments) == 2 else 0
    # The sliding segment gets at least half of each window; the repeated one fills the rest.
    room_w = room - min(other, room // 2)
    only = ("only_first", "only_second")
    plans = []
    for start, end in word_windows(counts[slide], room_w, stride):
        segs, offsets = list(segments), [0] * len(segments)
        segs[slide], offsets[slide] = segments[slide][start:end], start
        size = int(counts[slide][start:end].sum())
        if size + other <= room:
            truncation = False
        elif size <= room_w:
            truncation = only[1 - slide]  # the repeated segment loses its end
        elif other <= room // 2:
            truncation = only[slide]  # a lone word longer than the window keeps its first sub-words
        else:
            truncation = "longest_first"  # both at once; each keeps at least half the room
        plans.append((segs, offsets, truncation))
    return plans


def _encode(tokenizer, segments, offsets, n_a, max_length, truncation):
    """Tokenise one window's words: (input_ids, attention_mask, token_type_ids or None, token_word ``[T]``).

    ``offsets``: global index of each segment's first word in this window; ``truncation``: False
    or a Hugging Face truncation strategy applied at ``max_length``.
    """
    enc = tokenizer(*segments, is_split_into_words=True, return_token_type_ids=True, truncation=truncation,
                    max_length=max_length if truncation else None)
    tw = np.full(len(enc["input_ids"]), SPECIAL, dtype=np.int32)
    for t, (wid, sid) in enumerate(zip(enc.word_ids(), enc.sequence_ids())):
        if wid is not None and sid is not None:
            tw[t] = wid + offsets[sid] + (n_a if sid == 1 else 0)
    has_types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
    return (list(enc["input_ids"]), list(enc["attention_mask"]),
            list(enc["token_type_ids"]) if has_types else None, tw)


def _kept_tokens(token_words: list[np.ndarray]) -> int:
    """Sub-words of the example present in at least one window (a word's most complete copy counts)."""
    best: dict[int, int] = {}
    for tw in token_words:
        words, n = np.unique(tw[tw >= 0], return_counts=True)
        for w, k in zip(words.tolist(), n.tolist()):
            best[w] = max(best.get(w, 0), k)
    return sum(best.values())


def first_subword_positions(token_word: np.ndarray) -> np.ndarray:
    """``[T]`` bool: the token is the first sub-word of its word in this window (labels go there)."""
    token_word = np.asarray(token_word)
    first = token_word >= 0
    first[1:] &= token_word[1:] != token_word[:-1]
    return first
