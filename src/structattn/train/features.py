"""The features of sentence and token tasks, from a task split to model-ready windows (what every fine-tuning
family on those tasks reads: SLA/WLA/LISA in `structattn.finetuning`, SG-Net in `structattn.sgnet`).

examples (words, labels) -> parses (spaCy, cached) -> word structures (compact
per-sentence relation blocks) -> encoded windows -> feature dicts that
`StructureCollator` batches.

An example longer than ``max_length`` is truncated or split into overlapping word-aligned
windows (``long_inputs``, see `encoding_mode`); every feature records its
``example_index`` so predictions can be put back together per example, and how many
examples were cut or split is logged per split.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..structure import (EncodedWindow, WordStructure, build_word_structures, encode_words,
                         first_subword_positions)
from ..structure.align import check_long_inputs
from ..structure.spec import StructureSpec
from ..tasks.base import Example, TaskSpec

log = logging.getLogger(__name__)

IGNORE = -100


def parse_examples(examples: Sequence[Example], parser_name: str, *, show_progress: bool = True):
    """Dependency parses of every example's segments (through the on-disk cache).

    Returns:
        (passages_a, passages_b): per example a list of Parse; passages_b is None for single-sentence tasks.
    """
    from ..dependency.cache import parse_cached
    from ..dependency.spacy_backend import SpacyParser

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
    from ..dependency import Parse

    pa = [[Parse.chain(ex.words_a)] for ex in examples]
    pb = [[Parse.chain(ex.words_b)] for ex in examples] if examples and examples[0].words_b is not None else None
    return build_word_structures(pa, pb, relation, **options)


def encoding_mode(task: TaskSpec, long_inputs: str, training: bool) -> str:
    """How examples longer than ``max_length`` are encoded: ``"truncate"`` or ``"windows"``.

    ``long_inputs`` is the user's choice and holds everywhere with one exception: tagging metrics
    need a prediction for every gold word, so under ``truncate`` tagging examples are truncated
    for training only; for evaluation and prediction they are split into word-aligned windows
    (and counted as such). Under ``windows`` a classification/regression example gives several
    windows that all carry its label, and its prediction is the mean of their logits.
    """
    check_long_inputs(long_inputs)
    if long_inputs == "truncate" and task.kind == "tagging" and not training:
        return "windows"
    return long_inputs


@dataclass
class LongInputCounts:
    """How many examples of one split did not fit in ``max_length`` tokens, and what was done."""

    split: str
    mode: str  # encoding_mode's answer
    max_length: int
    examples: int = 0
    long: int = 0  # examples longer than max_length (special tokens included)
    windows: int = 0  # windows those long examples became
    cut: int = 0  # examples that lost sub-word tokens (see encode_words)
    dropped: int = 0  # sub-word tokens in no window

    def add(self, windows: Sequence[EncodedWindow]) -> None:
        """Count one example from its windows."""
        self.examples += 1
        if windows[0].example_length > self.max_length:
            self.long += 1
            self.windows += len(windows)
        if windows[0].dropped_tokens:
            self.cut += 1
            self.dropped += windows[0].dropped_tokens

    def summary(self, tagging_evaluation: bool = False) -> str:
        head = f"{self.split}: {self.long:,} of {self.examples:,} examples longer than {self.max_length} tokens"
        if self.mode == "truncate":
            return f"{head}: truncated ({self.dropped:,} sub-word tokens dropped)"
        text = f"{head}: split into {self.windows:,} overlapping windows starting at word starts"
        if self.cut:
            text += (f"; {self.cut:,} example(s) lost {self.dropped:,} sub-word tokens (a word longer than a window "
                     "keeps its first ones; the repeated segment of a pair is cut to fit beside the sliding one)")
        if tagging_evaluation:
            text += " (tagging evaluation predicts every word; --long-inputs truncate applies to training)"
        return text


def build_features(task: TaskSpec, examples: Sequence[Example], tokenizer, structure: StructureSpec, *,
                   max_length: int, stride: int, parser_name: str, label_to_id: dict | None = None,
                   long_inputs: str = "truncate", training: bool = False, split: str = "examples",
                   show_progress: bool = True) -> list[dict]:
    """Feature dicts (one per window) for ``examples``.

    Each feature: ``input_ids``, ``attention_mask``, ``token_type_ids`` (or None), ``token_word``
    (``[T]`` int), ``example_index``, ``structure`` (WordStructure or None), ``labels``
    (class id / float / per-token tag ids with -100 off first sub-words, or None when unlabelled).
    ``structure.need_parents`` (LISA) gives every example its parse's structure even without a word relation.

    ``long_inputs`` and ``training`` decide how long examples are encoded (`encoding_mode`);
    how many were cut or split is logged under ``split`` and printed when ``show_progress``.
    """
    mode = encoding_mode(task, long_inputs, training)
    structures: list[WordStructure | None]
    if not structure.needs_word_structures:
        structures = [None] * len(examples)
    elif structure.needs_parse:
        pa, pb = parse_examples(examples, parser_name, show_progress=show_progress)
        structures = build_word_structures(pa, pb, structure.relation or "all", **structure.options)
        _check_word_counts(examples, pa, pb)
    else:
        structures = _flat_structures(examples, structure.relation, structure.options)

    features = []
    counts = LongInputCounts(split, mode, max_length)
    for idx, (ex, st) in enumerate(zip(examples, structures)):
        windows = encode_words(tokenizer, ex.words_a, ex.words_b, max_length=max_length, stride=stride,
                               long_inputs=mode, example_index=idx, where=ex.guid)
        counts.add(windows)
        for win in windows:
            features.append({"input_ids": win.input_ids, "attention_mask": win.attention_mask,
                             "token_type_ids": win.token_type_ids, "token_word": win.token_word,
                             "example_index": idx, "structure": st,
                             "labels": _labels(task, ex, win.token_word, label_to_id)})
    _report_long_inputs(counts, tagging_evaluation=mode != long_inputs, show_progress=show_progress)
    return features


def _report_long_inputs(counts: LongInputCounts, tagging_evaluation: bool, show_progress: bool) -> None:
    """Log the counts; print them too (beside the progress bars) when some example was too long."""
    message = counts.summary(tagging_evaluation)
    log.info(message)
    if counts.long and show_progress:
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)


def _check_word_counts(examples, pa, pb) -> None:
    # The parse cache returns exactly what the parser returned for these words (entries are keyed by the
    # words and the parser's fingerprint, and checksummed), so a mismatch comes from the parser itself.
    for i, ex in enumerate(examples):
        for name, words, passages in (("first", ex.words_a, pa), ("second", ex.words_b, pb)):
            if passages is None:
                continue
            n = sum(len(p) for p in passages[i])
            if n != len(words):
                raise RuntimeError(f"{ex.guid}: the parser returned {n} words for the {len(words)} words of the {name} "
                                   "segment; use a spaCy pipeline that keeps the words it is given (no component "
                                   "that merges or splits tokens), or report this as a bug")


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


def aggregate_predictions(task: TaskSpec, features: Sequence[dict], window_logits: Sequence[np.ndarray],
                          examples: Sequence[Example], id_to_label: Sequence[str] | None):
    """Put window predictions back together per example.

    Classification/regression: mean of the windows' logits (under ``--long-inputs windows`` every
    window of an example carries its label and votes with equal weight). Tagging: each word takes
    the prediction at its first sub-word in the window where that sub-word is farthest from an
    edge (most context on both sides); the features must cover every word (built with
    ``training=False``). Returns one prediction per example, in the form of ``Example.label``
    (class id, float, or a list of tag strings per word).
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
        if missing:  # features built for training truncate tagging examples
            raise RuntimeError(f"{ex.guid}: words {missing} got no prediction; build evaluation features with "
                               "build_features(..., training=False)")
        preds.append([id_to_label[best[i][w][1]] for w in range(n_words)])
    return preds
