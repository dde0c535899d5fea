"""From a task split to model-ready features.

examples (words, labels) -> parses (spaCy, cached) -> word structures (compact
per-sentence relation blocks) -> encoded windows -> feature dicts that
:class:`~structattn.structure.StructureCollator` batches.

A long example becomes several overlapping windows; every feature records its
``example_index`` so predictions can be put back together per example.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..structure import (ExpansionRules, WordStructure, build_word_structures, encode_words,
                         first_subword_positions)
from ..tasks.base import Example, TaskSpec

log = logging.getLogger(__name__)

IGNORE = -100


@dataclass
class StructureSpec:
    """Which word relation the model's mechanism needs (None = no structure mask)."""

    relation: str | None
    options: dict
    rules: ExpansionRules
    need_parents: bool = False

    @property
    def needs_parse(self) -> bool:
        return self.relation not in (None, "all", "window", "forward", "backward") or self.need_parents


def parse_examples(examples: Sequence[Example], parser_name: str, *, show_progress: bool = True):
    """Dependency parses of every example's segments (through the on-disk cache).

    Returns:
        (passages_a, passages_b): per example a list of Parse; passages_b is None for single-sentence tasks.
    """
    from ..parsing.cache import parse_cached
    from ..parsing.spacy_backend import SpacyParser

    from tqdm.auto import tqdm

    parser = SpacyParser(model=parser_name)

    def parse(items, desc):
        with tqdm(total=len(items), desc=desc, disable=not show_progress, leave=False) as bar:
            return parse_cached(items, parser, kind="words", progress=bar.update)

    passages_a = parse([ex.words_a for ex in examples], "parse")
    passages_b = None
    if examples and examples[0].words_b is not None:
        passages_b = parse([ex.words_b for ex in examples], "parse (second segment)")
    return passages_a, passages_b


def _flat_structures(examples: Sequence[Example], relation: str, options: dict) -> list[WordStructure]:
    """Structures for relations that need no parse (window/forward/backward/all): one chain per segment."""
    from ..parsing import Parse

    def chain(words):  # heads are ignored by these relations; a chain keeps the record a valid tree
        n = len(words)
        return [Parse(words=words, heads=[0] + list(range(1, n)), deprels=["dep"] * n, upos=[""] * n)]

    pa = [chain(ex.words_a) for ex in examples]
    pb = [chain(ex.words_b) for ex in examples] if examples and examples[0].words_b is not None else None
    return build_word_structures(pa, pb, relation, **options)


def build_features(task: TaskSpec, examples: Sequence[Example], tokenizer, structure: StructureSpec, *,
                   max_length: int, stride: int, parser_name: str, label_to_id: dict | None = None,
                   show_progress: bool = True) -> list[dict]:
    """Feature dicts (one per window) for ``examples``.

    Each feature: ``input_ids``, ``attention_mask``, ``token_type_ids`` (or None), ``token_word``
    (``[T]`` int), ``example_index``, ``structure`` (WordStructure or None), ``labels``
    (class id / float / per-token tag ids with -100 off first sub-words, or None when unlabelled),
    and ``parent_targets`` (``[T]`` token index of the parent word's first sub-word, -100 where
    undefined) when ``structure.need_parents``.
    """
    structures: list[WordStructure | None]
    if structure.relation is None and not structure.need_parents:
        structures = [None] * len(examples)
    elif structure.needs_parse:
        pa, pb = parse_examples(examples, parser_name, show_progress=show_progress)
        structures = build_word_structures(pa, pb, structure.relation or "all", **structure.options)
        _check_word_counts(examples, pa, pb)
    else:
        structures = _flat_structures(examples, structure.relation, structure.options)

    features = []
    for idx, (ex, st) in enumerate(zip(examples, structures)):
        windows = encode_words(tokenizer, ex.words_a, ex.words_b, max_length=max_length, stride=stride,
                               example_index=idx, where=ex.guid)
        for win in windows:
            feat = {"input_ids": win.input_ids, "attention_mask": win.attention_mask,
                    "token_type_ids": win.token_type_ids, "token_word": win.token_word,
                    "example_index": idx, "structure": st,
                    "labels": _labels(task, ex, win.token_word, label_to_id)}
            if structure.need_parents and st is not None:
                feat["parent_targets"] = parent_targets(win.token_word, st.parents)
            features.append(feat)
    return features


def _check_word_counts(examples, pa, pb) -> None:
    for i, ex in enumerate(examples):
        n_a = sum(len(p) for p in pa[i])
        if n_a != len(ex.words_a) or (pb is not None and sum(len(p) for p in pb[i]) != len(ex.words_b)):
            raise RuntimeError(f"{ex.guid}: the parser returned a different number of words than it was given; "
                               "the parse cache may be stale (delete it and rerun)")


def _labels(task: TaskSpec, ex: Example, token_word: np.ndarray, label_to_id: dict | None):
    if ex.label is None:
        return None
    if task.kind == "classification":
        return int(ex.label)
    if task.kind == "regression":
        return float(ex.label)
    # tagging: the label sits on the first sub-word of each word (as in the SLA paper)
    first = first_subword_positions(token_word)
    out = [IGNORE] * len(token_word)
    for t in np.nonzero(first)[0]:
        out[t] = label_to_id[ex.label[int(token_word[t])]]
    return out


def parent_targets(token_word: np.ndarray, parents: np.ndarray) -> list[int]:
    """Per token, the position of its head word's first sub-word in this window.

    Roots attend to themselves; non-first sub-words, special tokens and words whose head
    falls outside the window get -100 (no supervision).
    """
    token_word = np.asarray(token_word)
    first = first_subword_positions(token_word)
    pos_of_word = {int(token_word[t]): int(t) for t in np.nonzero(first)[0]}
    out = [IGNORE] * len(token_word)
    for t in np.nonzero(first)[0]:
        w = int(token_word[t])
        head = int(parents[w])
        target = t if head < 0 else pos_of_word.get(head)
        if target is not None:
            out[t] = int(target)
    return out


def aggregate_predictions(task: TaskSpec, features: Sequence[dict], window_logits: Sequence[np.ndarray],
                          examples: Sequence[Example], id_to_label: Sequence[str] | None):
    """Put window predictions back together per example.

    Classification/regression: mean of the windows' logits. Tagging: each word takes the
    prediction at its first sub-word in the window where that sub-word is farthest from an
    edge (most context on both sides). Returns one prediction per example, in the form of
    ``Example.label`` (class id, float, or a list of tag strings per word).
    """
    n = len(examples)
    if task.kind in ("classification", "regression"):
        sums: list = [None] * n
        counts = np.zeros(n, dtype=np.int64)
        for feat, logits in zip(features, window_logits):
            i = feat["example_index"]
            sums[i] = logits if sums[i] is None else sums[i] + logits
            counts[i] += 1
        preds = []
        for i in range(n):
            mean = sums[i] / counts[i]
            preds.append(float(mean.reshape(-1)[0]) if task.kind == "regression" else int(np.argmax(mean)))
        return preds
    best: list[dict] = [dict() for _ in range(n)]
    for feat, logits in zip(features, window_logits):
        i = feat["example_index"]
        tw = np.asarray(feat["token_word"])
        T = len(tw)
        for t in np.nonzero(first_subword_positions(tw))[0]:
            w = int(tw[t])
            centrality = min(t, T - 1 - t)
            if w not in best[i] or centrality > best[i][w][0]:
                best[i][w] = (centrality, int(np.argmax(logits[t])))
    preds = []
    for i, ex in enumerate(examples):
        n_words = len(ex.words_a)
        missing = [w for w in range(n_words) if w not in best[i]]
        if missing:  # pragma: no cover - encode_words guarantees coverage
            raise RuntimeError(f"{ex.guid}: words {missing} got no prediction")
        preds.append([id_to_label[best[i][w][1]] for w in range(n_words)])
    return preds
