"""Span question answering with no-answer: decoding start/end logits into answer texts (BERT's run_squad rules).

Notation: T tokens in one window (feature); a question is split into one or more windows that all hold the
question and a slice of its passage. ``token_word`` ``[T]`` maps each token to its global word index (question
words 0 .. Q-1, then passage words Q .. Q+P-1) or -1 for special tokens ([CLS], [SEP]); position 0 is the
leading special token ([CLS], ``<s>``) whose logits score "no answer".

Per window, a candidate answer is a pair of token positions s <= e, both in the passage, spanning at most
``max_answer_length`` passage *words* (word(e) - word(s) + 1, sub-words do not count); its score is
``start[s] + end[e]``. Token pairs that give the same words are one candidate with their best score (so a span
is the same answer in every window that holds it). Its text is the original context between the first word's
first character and the last word's last one, so spacing and case are kept exactly.

- null score of a window: ``start[0] + end[0]``; a question's null score is the *minimum* over its windows
  (BERT's run_squad: the window that believes most in an answer decides).
- best span: the highest-scoring candidate over all windows.
- ``na_score = null - best``; the prediction is ``""`` (no answer) when ``na_score > threshold``. The
  na-scores are what the official scorer's ``--na-prob-file`` takes, and
  [`tune_threshold`][structattn.sgnet.span_qa.tune_threshold] picks the threshold the way its best-F1 sweep does.
- n-best: the ``n_best`` highest-scoring candidates with distinct texts (a text found at several places keeps
  its best score), with probabilities = softmax of their scores over the n-best list.

The search is exact: every candidate of every window is scored (vectorised per window), never only the top-k
starts and ends.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..errors import UserError

SPECIAL = -1

PREDICTIONS_FILE = "predictions.json"
NA_PROB_FILE = "null_odds.json"
NBEST_FILE = "nbest_predictions.json"


@dataclass(frozen=True)
class QAContext:
    """What decoding needs to turn one question's word spans back into text.

    Attributes:
        qid: the question id (key of the prediction files).
        context: the passage text, exactly as in the data file.
        spans: ``[P]`` ``(start, end)`` character spans of the passage words (``context[start:end]`` is word p).
        offset: global word index of the first passage word in ``token_word`` (= number of question words).
        words: ``[P]`` the passage words (for inspection; decoding reads the text through ``spans``).
    """

    qid: str
    context: str
    spans: Sequence[tuple[int, int]]
    offset: int
    words: Sequence[str] = ()


@dataclass
class _Candidates:
    """Candidate spans of one question: passage word span ``[first, last]`` and logits (arrays of equal length)."""

    first: np.ndarray
    last: np.ndarray
    start_logit: np.ndarray
    end_logit: np.ndarray

    @property
    def score(self) -> np.ndarray:
        return self.start_logit + self.end_logit


def window_candidates(start_logits: np.ndarray, end_logits: np.ndarray, token_word: np.ndarray, offset: int,
                      max_answer_length: int) -> _Candidates:
    """Every candidate span of one window, one entry per distinct word span with its best token pair.

    Args:
        start_logits: ``[T]`` float.
        end_logits: ``[T]`` float.
        token_word: ``[T]`` int, global word index or -1 (special) / -2 (padding).
        offset: global index of the first passage word.
        max_answer_length: most passage words a span may hold.
    Returns:
        candidates with passage word indices (0 = first passage word).
    """
    tw = np.asarray(token_word)
    pos = np.nonzero(tw >= offset)[0]  # passage tokens, increasing position => non-decreasing word
    words = tw[pos].astype(np.int64) - offset
    s = np.asarray(start_logits, dtype=np.float64)[pos]
    e = np.asarray(end_logits, dtype=np.float64)[pos]
    if np.any(np.diff(words) < 0):
        raise ValueError("the passage words of a window must come in reading order")
    n = len(pos)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return _Candidates(empty, empty, np.zeros(0), np.zeros(0))
    # For start token i the valid end tokens are i .. upper[i]: at most max_answer_length words on.
    upper = np.searchsorted(words, words + max_answer_length - 1, side="right") - 1
    count = upper - np.arange(n) + 1
    i = np.repeat(np.arange(n), count)
    j = i + (np.arange(len(i)) - np.repeat(np.cumsum(count) - count, count))
    score = s[i] + e[j]
    key = words[i] * (int(words[-1]) + 1) + words[j]
    # Best token pair per word span: order by score (stable), first occurrence of each key.
    order = np.argsort(-score, kind="stable")
    _, first_hit = np.unique(key[order], return_index=True)
    best = order[first_hit]
    return _Candidates(words[i[best]], words[j[best]], s[i[best]], e[j[best]])


def _merge(parts: list[_Candidates]) -> _Candidates:
    """Candidates of several windows, each word span once with its best score, sorted best first."""
    first = np.concatenate([p.first for p in parts])
    last = np.concatenate([p.last for p in parts])
    st = np.concatenate([p.start_logit for p in parts])
    en = np.concatenate([p.end_logit for p in parts])
    order = np.argsort(-(st + en), kind="stable")
    if len(order):
        key = first[order] * (int(last.max()) + 1) + last[order]
        _, first_hit = np.unique(key, return_index=True)
        order = order[np.sort(first_hit)]  # first_hit indexes the sorted order: sorting keeps best first
    return _Candidates(first[order], last[order], st[order], en[order])


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def _check_options(n_best: int, max_answer_length: int) -> None:
    if not isinstance(n_best, (int, np.integer)) or n_best < 1:
        raise UserError(f"n_best={n_best!r} must be a positive integer (answers kept per question)")
    if not isinstance(max_answer_length, (int, np.integer)) or max_answer_length < 1:
        raise UserError(f"max_answer_length={max_answer_length!r} must be a positive integer (most words in an "
                        "answer; the SQuAD default is 30)")


def predict_answers(questions: Sequence[QAContext], features: Sequence[Mapping], start_logits: Sequence[np.ndarray],
                    end_logits: Sequence[np.ndarray], threshold: float = 0.0, n_best: int = 20,
                    max_answer_length: int = 30, with_offsets: bool = False
                    ) -> tuple[dict[str, str], dict[str, float], dict[str, list[dict]]]:
    """Answers for every question from the start/end logits of its windows.

    Args:
        questions: one [`QAContext`][structattn.sgnet.span_qa.QAContext] per question; ``feature["example_index"]``
            indexes this list.
        features: one dict per window with ``token_word`` (``[T_f]``) and ``example_index``.
        start_logits: per window ``[T_f]`` (or longer: padded positions past ``T_f`` are ignored),
            e.g. the rows of a ``[F, T]`` array.
        end_logits: the same for the end.
        threshold: answer "" when ``na_score > threshold``; ``float("inf")`` never answers "" (the
            predictions without null that [`tune_threshold`][structattn.sgnet.span_qa.tune_threshold] needs).
        n_best: candidates kept per question in the n-best list.
        max_answer_length: most passage words in an answer.
        with_offsets: add ``start`` / ``end`` to each n-best entry: the answer's character offsets in the
            question's context (``context[start:end] == text``; the best-scored place of a text found twice).
    Returns:
        ``predictions`` {qid: text or ""}, ``na_scores`` {qid: null score - best span score}, ``nbest`` {qid:
        [{"text", "start_logit", "end_logit", "probability"}, ...] best first; its first text is the best
        non-null answer}.
    """
    _check_options(n_best, max_answer_length)
    if not (len(features) == len(start_logits) == len(end_logits)):
        raise ValueError(f"{len(features)} features but {len(start_logits)} start and {len(end_logits)} end logit rows")
    parts: list[list[_Candidates]] = [[] for _ in questions]
    null = np.full(len(questions), np.inf)
    for feat, st, en in zip(features, start_logits, end_logits):
        q = int(feat["example_index"])
        tw = np.asarray(feat["token_word"])
        T = len(tw)
        st, en = np.asarray(st)[:T], np.asarray(en)[:T]
        if len(st) < T or len(en) < T:
            raise ValueError(f"window of question {questions[q].qid!r} has {T} tokens but {len(st)} start and "
                             f"{len(en)} end logits")
        if tw[0] != SPECIAL:
            raise ValueError("position 0 of a window must be the leading special token ([CLS]) that scores no answer")
        null[q] = min(null[q], float(st[0]) + float(en[0]))
        parts[q].append(window_candidates(st, en, tw, questions[q].offset, max_answer_length))
    missing = [questions[q].qid for q in range(len(questions)) if not parts[q]]
    if missing:
        raise ValueError(f"{len(missing)} question(s) have no window among the features, e.g. {missing[:5]}; pass "
                         "the features built for these questions")

    predictions: dict[str, str] = {}
    na_scores: dict[str, float] = {}
    nbest: dict[str, list[dict]] = {}
    for q, question in enumerate(questions):
        cand = _merge(parts[q])
        if len(cand.first) == 0:  # every window holds a passage word, so this means bad features
            raise ValueError(f"question {question.qid!r}: no window holds a passage word")
        entries, seen = [], set()
        for a, b, s, e in zip(cand.first, cand.last, cand.start_logit, cand.end_logit):
            text = question.context[question.spans[a][0]:question.spans[b][1]]
            if text in seen:  # the same text elsewhere in the passage scored lower
                continue
            seen.add(text)
            entries.append({"text": text, "start_logit": float(s), "end_logit": float(e)})
            if with_offsets:
                entries[-1].update(start=int(question.spans[a][0]), end=int(question.spans[b][1]))
            if len(entries) == n_best:
                break
        probs = _softmax(np.array([x["start_logit"] + x["end_logit"] for x in entries]))
        for entry, p in zip(entries, probs):
            entry["probability"] = float(p)
        best = entries[0]
        na = float(null[q] - (best["start_logit"] + best["end_logit"]))
        na_scores[question.qid] = na
        predictions[question.qid] = "" if na > threshold else best["text"]
        nbest[question.qid] = entries
    return predictions, na_scores, nbest


def f1_by_threshold(dataset: dict, predictions_without_null: Mapping[str, str],
                    na_scores: Mapping[str, float]) -> list[tuple[float, float]]:
    """F1 (percent, the official scorer's) at every threshold that changes an answer, in increasing order.

    The official scorer's best-F1 sweep walks the questions in order of their no-answer probability, starting from
    "every question answered no-answer" at threshold 0.0 — right for probabilities in [0, 1], wrong for na-scores
    (null − best span logits) that go below 0. Here the first point is a threshold below every na-score
    (``min - 1``: everything "no answer"), and questions with equal na-scores are answered together (one threshold
    cannot split them).

    Args:
        dataset: the SQuAD-format dict of the questions (``load_squad``'s answer).
        predictions_without_null: the best non-null answer per question (``predict_answers(...,
            threshold=float("inf"))``).
        na_scores: ``predict_answers``'s na-scores.
    Returns:
        ``[(threshold, f1), ...]``: answering ``""`` where ``na_score > threshold`` scores ``f1``.
    """
    from ..tasks.squad_eval import best_threshold, has_answer, raw_scores

    best_threshold(dict(predictions_without_null), dict(na_scores), dataset)  # the official checks of the inputs
    answerable = has_answer(dataset)
    _, f1 = raw_scores(dataset, predictions_without_null)
    order = sorted(answerable, key=lambda q: na_scores[q])
    running = sum(1 for q in order if not answerable[q])  # everything answered "" (right when unanswerable)
    curve = [(float(na_scores[order[0]]) - 1.0 if order else 0.0, 100.0 * running / max(len(order), 1))]
    i = 0
    while i < len(order):
        value = na_scores[order[i]]
        while i < len(order) and na_scores[order[i]] == value:  # answer this group: it gains F1 or loses a null
            q = order[i]
            running += f1[q] if answerable[q] else -float(bool(predictions_without_null[q]))
            i += 1
        curve.append((float(value), 100.0 * running / len(order)))
    return curve


def tune_threshold(dataset: dict, predictions_without_null: Mapping[str, str], na_scores: Mapping[str, float]) -> float:
    """The no-answer threshold that maximises F1 on ``dataset``: the official scorer's best-F1 sweep, in the
    semantics of our na-scores (the lowest threshold of the best point of
    [`f1_by_threshold`][structattn.sgnet.span_qa.f1_by_threshold]). The best F1 found is the official ``best_f1``
    whenever the scores are distinct.

    Returns:
        the threshold to pass to [`predict_answers`][structattn.sgnet.span_qa.predict_answers] (answer "" where
        ``na_score > threshold``).
    """
    curve = f1_by_threshold(dataset, predictions_without_null, na_scores)
    return max(curve, key=lambda point: point[1])[0]  # the first of equal maxima: the fewest answers


def _finite(name: str, value) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} is {value}; JSON files hold finite numbers only")
    return value


def na_probabilities(na_scores: Mapping[str, float]) -> dict[str, float]:
    """No-answer probabilities for the official scorer's ``--na-prob-file``: σ(null − best span score).

    Monotonic in the na-score (the scorer's best-threshold sweep finds the same split of the questions) and in
    (0, 1), as the scorer assumes: its default threshold 1.0 then never turns an answer into no-answer (our
    predictions already answer "" where the tuned threshold says so), and its sweep's starting point, threshold
    0.0 = "every question no-answer", is one indeed.
    """
    return {qid: float(0.5 * (1.0 + math.tanh(0.5 * float(x)))) for qid, x in na_scores.items()}


def write_predictions(folder: str | Path, predictions: Mapping[str, str], na_scores: Mapping[str, float] | None = None,
                      nbest: Mapping[str, list[dict]] | None = None) -> dict[str, Path]:
    """Write the prediction files into ``folder``, each atomically (a crash leaves the old file or the new one).

    Files: ``predictions.json`` {qid: text} (the official scorer's prediction file), ``null_odds.json`` {qid:
    no-answer probability, [`na_probabilities`][structattn.sgnet.span_qa.na_probabilities] of ``na_scores``} (its
    ``--na-prob-file``) and ``nbest_predictions.json`` {qid: [entries]}; the last two only when given. Returns the paths
    written, keyed ``predictions`` / ``na_prob`` / ``nbest``.
    """
    from ..io import atomic_write_json

    folder = Path(folder)
    files = {"predictions": (PREDICTIONS_FILE, {str(k): str(v) for k, v in predictions.items()})}
    if na_scores is not None:
        checked = {str(k): _finite(f"na_score of {k!r}", v) for k, v in na_scores.items()}
        files["na_prob"] = (NA_PROB_FILE, na_probabilities(checked))
    if nbest is not None:
        files["nbest"] = (NBEST_FILE, {str(k): [{"text": str(x["text"]),
                                                 "start_logit": _finite(f"start_logit of {k!r}", x["start_logit"]),
                                                 "end_logit": _finite(f"end_logit of {k!r}", x["end_logit"]),
                                                 "probability": _finite(f"probability of {k!r}", x["probability"])}
                                                for x in v] for k, v in nbest.items()})
    # Every value was checked above, before the first file is written.
    written = {}
    for name, (filename, obj) in files.items():
        written[name] = folder / filename
        atomic_write_json(written[name], obj)
    return written
