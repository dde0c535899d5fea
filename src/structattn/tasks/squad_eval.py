"""SQuAD scoring with the rules of the official ``evaluate-v2.0.py`` (SQuAD-explorer, 2018; rules listed in
``squad2/SOURCE.md`` of the data folder). Works on SQuAD 1.1 files too: there every question has answers, so the
output simply has no ``NoAns_*`` keys.

Rules, in the official script's order:

1. **Normalisation** ([`normalize_answer`][structattn.tasks.squad_eval.normalize_answer]), of gold answers and
predictions alike: lower-case, drop every
   character of ``string.punctuation``, replace the articles ``a``/``an``/``the`` (regex ``\\b(a|an|the)\\b``)
   by a space, collapse runs of whitespace to one space and strip.
2. **Gold answers** of a question: its answer texts whose normalised form is not empty; when none is left
   (an unanswerable question, or only answers such as ``"The"``) the one gold answer is ``""``.
   A question *has an answer* (HasAns) when its ``answers`` list is not empty, whatever the texts normalise to.
3. **EM** ([`exact_match`][structattn.tasks.squad_eval.exact_match]) = 1 when the normalised strings are equal. **F1**
([`f1_score`][structattn.tasks.squad_eval.f1_score]): tokens =
   the normalised string split on whitespace; overlap = size of the multiset intersection; P = overlap /
   predicted tokens, R = overlap / gold tokens, F1 = 2PR / (P + R); when either side has no token, F1 = 1 if
   both have none, else 0. A question scores the maximum EM and the maximum F1 over its gold answers.
4. **No-answer threshold**: with na_probs, a question whose ``na_prob > na_prob_thresh`` is scored as a
   no-answer prediction: 1 when it has no answer, 0 when it has one. Without na_probs every na_prob is 0, so the
   default threshold 1.0 never applies.
5. **Output** ([`evaluate`][structattn.tasks.squad_eval.evaluate]), percentages (100 * mean), keys in the script's
order: ``exact``, ``f1``,
   ``total``; ``HasAns_exact``, ``HasAns_f1``, ``HasAns_total`` (when some question has an answer);
   ``NoAns_exact``, ``NoAns_f1``, ``NoAns_total`` (when some has none); with na_probs also ``best_exact``,
   ``best_exact_thresh``, ``best_f1``, ``best_f1_thresh``.
6. **Best-threshold sweep** ([`sweep_threshold`][structattn.tasks.squad_eval.sweep_threshold],
[`best_threshold`][structattn.tasks.squad_eval.best_threshold]): start from "every question
   predicted no-answer" (score = number of unanswerable questions, threshold 0.0); visit the questions in order of
   increasing na_prob (a stable sort: equal na_probs keep the order of the ``na_probs`` mapping) and let each one
   keep its prediction: an answerable question adds its raw score, an unanswerable one adds -1 if its prediction
   is not empty and 0 if it is. Whenever the running score *strictly* exceeds the best so far, it becomes the best
   and the threshold becomes that question's na_prob. Result: 100 * best / questions scored. The sweep scores
   the *raw* predictions: a model tuning its threshold passes its best non-empty answers, so that the score at a
   threshold is the score it would get by answering exactly the questions whose na_prob is at most it. With tied
   na_probs the sweep may stop inside a tie (the script does): the threshold then answers the whole tie, and the
   best score can exceed what that threshold really gives. The sweep tests the prediction string itself, not its
   normalised form: an unanswerable question answered with, say, ``"the"`` counts -1 there but scores 1 in EM/F1.

Deviations, all where the official script crashes or hides a problem: a question without a prediction counts as
wrong (EM 0, F1 0, whatever its gold answers; the script prints "Missing prediction", leaves it out of the total
and then dies on a ``KeyError`` in the HasAns/NoAns breakdown) and
[`missing_predictions`][structattn.tasks.squad_eval.missing_predictions] lists them (the ``score squad`` command reports
how many); a missing na_prob of a predicted question, a prediction that is not a string, an na_prob that is not a number
(NaN included: it cannot be sorted), and a data file with no question raise [`UserError`][structattn.errors.UserError].
Predictions for ids that are not in the data are ignored, as by the script (the ``score squad`` command reports how
many).
"""
from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterator, Mapping

from ..errors import UserError

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
#: how many ids an error message names
_SHOW = 5


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace (rule 1)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def exact_match(gold: str, prediction: str) -> int:
    """1 when the normalised strings are equal, else 0."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_score(gold: str, prediction: str) -> float:
    """Bag-of-tokens F1 of the normalised strings (rule 3); 1.0 when both have no token, 0.0 when only one has."""
    gold_tokens, pred_tokens = _tokens(gold), _tokens(prediction)
    if not gold_tokens or not pred_tokens:
        return float(gold_tokens == pred_tokens)
    overlap = sum((Counter(gold_tokens) & Counter(pred_tokens)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


# ------------------------------------------------------------------------------------------------- data
def _articles(dataset) -> list:
    """The article list of a SQuAD JSON object (``{"data": [...]}``) or of the list itself."""
    articles = dataset.get("data") if isinstance(dataset, Mapping) else dataset
    if not isinstance(articles, list):
        raise UserError('dataset is not in SQuAD format: expected {"version": ..., "data": [articles]}; '
                        "give the official JSON file")
    return articles


def _questions(dataset) -> Iterator[tuple[str, list[str]]]:
    """``(question id, answer texts)`` of every question, in file order; UserError naming a malformed entry."""
    for a, article in enumerate(_articles(dataset)):
        title = article.get("title") if isinstance(article, Mapping) else None
        paragraphs = article.get("paragraphs") if isinstance(article, Mapping) else None
        if not isinstance(paragraphs, list):
            raise UserError(f"dataset article {a} ({title!r}): no 'paragraphs' list; give the official SQuAD JSON")
        for p, paragraph in enumerate(paragraphs):
            qas = paragraph.get("qas") if isinstance(paragraph, Mapping) else None
            if not isinstance(qas, list):
                raise UserError(f"dataset article {a} ({title!r}), paragraph {p}: no 'qas' list; "
                                "give the official SQuAD JSON")
            for q, qa in enumerate(qas):
                where = f"dataset article {a} ({title!r}), paragraph {p}, question {q}"
                if not isinstance(qa, Mapping) or not isinstance(qa.get("id"), str):
                    raise UserError(f"{where}: no string 'id'; give the official SQuAD JSON")
                answers = qa.get("answers")
                if not isinstance(answers, list) or not all(
                        isinstance(x, Mapping) and isinstance(x.get("text"), str) for x in answers):
                    raise UserError(f"{where} (id {qa['id']!r}): 'answers' must be a list of "
                                    '{"text": ..., "answer_start": ...}; give the official SQuAD JSON')
                yield qa["id"], [x["text"] for x in answers]


def has_answer(dataset) -> dict[str, bool]:
    """Question id -> whether its ``answers`` list is non-empty, in file order (rule 2)."""
    return {qid: bool(texts) for qid, texts in _questions(dataset)}


def _missing(kind: str, ids: list[str], total: int, what_to_do: str) -> UserError:
    shown = ", ".join(repr(i) for i in ids[:_SHOW]) + (", ..." if len(ids) > _SHOW else "")
    return UserError(f"{len(ids)} of {total} questions have no {kind} (first: {shown}); {what_to_do}")


def missing_predictions(dataset, predictions: Mapping) -> list[str]:
    """The question ids of ``dataset`` without a prediction, in file order (they count as wrong)."""
    return [qid for qid, _ in _questions(dataset) if qid not in predictions]


def _check_predictions(predictions: Mapping, qids: list[str]) -> None:
    if not isinstance(predictions, Mapping):
        raise UserError("predictions must map question id -> answer text (a JSON object)")
    for qid in qids:
        if qid in predictions and not isinstance(predictions[qid], str):
            raise UserError(f"prediction for {qid!r} is {predictions[qid]!r}, not a string; "
                            'predictions map question id -> answer text ("" means no answer)')


def _check_na_probs(na_probs: Mapping, qids: list[str]) -> None:
    """``qids``: the questions that need one (those with a prediction)."""
    if not isinstance(na_probs, Mapping):
        raise UserError("na_probs must map question id -> no-answer probability or score (a JSON object)")
    missing = [qid for qid in qids if qid not in na_probs]
    if missing:
        raise _missing("na_prob", missing, len(qids),
                       "give a no-answer probability or score for every predicted question")
    for qid, value in na_probs.items():  # all of them: the sweep sorts every value, extra ids included
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise UserError(f"na_prob for {qid!r} is {value!r}, not a number")


# ---------------------------------------------------------------------------------------------- scoring
def raw_scores(dataset, predictions: Mapping[str, str]) -> tuple[dict[str, int], dict[str, float]]:
    """Per question id (file order): the best EM and the best F1 over its gold answers (rules 2-3), before any
    no-answer threshold; 0 and 0 for a question without a prediction (it counts as wrong).

    Raises:
        UserError: a prediction is not a string.
    """
    questions = list(_questions(dataset))
    _check_predictions(predictions, [qid for qid, _ in questions])
    exact: dict[str, int] = {}
    f1: dict[str, float] = {}
    for qid, texts in questions:
        if qid not in predictions:
            exact[qid], f1[qid] = 0, 0.0
            continue
        golds = [t for t in texts if normalize_answer(t)] or [""]
        prediction = predictions[qid]
        exact[qid] = max(exact_match(g, prediction) for g in golds)
        f1[qid] = max(f1_score(g, prediction) for g in golds)
    return exact, f1


def apply_threshold(scores: Mapping[str, float], na_probs: Mapping[str, float], answerable: Mapping[str, bool],
                    na_prob_thresh: float) -> dict[str, float]:
    """Rule 4: a question with ``na_prob > na_prob_thresh`` scores 1.0 if unanswerable, 0.0 if answerable (a
    question without an na_prob, i.e. without a prediction, keeps its score: 0)."""
    return {qid: (float(not answerable[qid]) if qid in na_probs and na_probs[qid] > na_prob_thresh else score)
            for qid, score in scores.items()}


def _summary(exact: Mapping[str, float], f1: Mapping[str, float], qids: list[str]) -> dict:
    total = len(qids)
    return {"exact": 100.0 * sum(exact[q] for q in qids) / total,
            "f1": 100.0 * sum(f1[q] for q in qids) / total,
            "total": total}


def sweep_threshold(predictions: Mapping[str, str], scores: Mapping[str, float], na_probs: Mapping[str, float],
                    answerable: Mapping[str, bool]) -> tuple[float, float]:
    """Rule 6 on one kind of raw score (EM or F1): ``(best score in percent, its na_prob threshold)``.

    ``scores``: raw per-question scores ([`raw_scores`][structattn.tasks.squad_eval.raw_scores]); ``answerable``:
    [`has_answer`][structattn.tasks.squad_eval.has_answer]. Ids of ``na_probs`` without a score are skipped.
    """
    # everything predicted no-answer (a question without a prediction stays wrong)
    running = best = sum(1 for q, v in answerable.items() if not v and q in predictions)
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):  # stable: ties keep the mapping's order
        if qid not in scores or qid not in predictions:
            continue
        if answerable[qid]:
            running += scores[qid]
        elif predictions[qid]:
            running -= 1
        if running > best:
            best, threshold = running, na_probs[qid]
    return 100.0 * best / len(scores), threshold


def evaluate(dataset, predictions: Mapping[str, str], na_probs: Mapping[str, float] | None = None,
             na_prob_thresh: float = 1.0) -> dict:
    """The dict the official script prints (rule 5), in its key order.

    Args:
        dataset: the SQuAD JSON object (``{"version", "data"}``) or its ``data`` list; 1.1 or 2.0.
        predictions: question id -> predicted text, ``""`` = no answer. Extra ids are ignored.
        na_probs: question id -> no-answer probability (or any score where higher = more likely no answer);
            None = all 0 and no ``best_*`` keys.
        na_prob_thresh: questions with na_prob above it count as predicted no-answer.

    Raises:
        UserError: no question in the data; a question without a prediction (or without an na_prob when
            na_probs is given); a prediction that is not a string; an na_prob that is not a number.
    """
    answerable = has_answer(dataset)
    qids = list(answerable)
    if not qids:
        raise UserError("the data holds no question; give a SQuAD file with questions")
    exact_raw, f1_raw = raw_scores(dataset, predictions)
    if na_probs is None:
        probs: Mapping[str, float] = {qid: 0.0 for qid in predictions}
    else:
        _check_na_probs(na_probs, [q for q in qids if q in predictions])
        probs = na_probs
    exact = apply_threshold(exact_raw, probs, answerable, na_prob_thresh)
    f1 = apply_threshold(f1_raw, probs, answerable, na_prob_thresh)
    out = _summary(exact, f1, qids)
    for prefix, subset in (("HasAns", [q for q in qids if answerable[q]]),
                           ("NoAns", [q for q in qids if not answerable[q]])):
        if subset:
            out.update({f"{prefix}_{key}": value for key, value in _summary(exact, f1, subset).items()})
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = sweep_threshold(predictions, exact_raw, probs, answerable)
        out["best_f1"], out["best_f1_thresh"] = sweep_threshold(predictions, f1_raw, probs, answerable)
    return out


def best_threshold(predictions: Mapping[str, str], na_probs: Mapping[str, float], dataset) -> tuple[float, float]:
    """``(best_f1, threshold)`` exactly as the official ``best_f1`` / ``best_f1_thresh`` (rule 6).

    For tuning a model's no-answer threshold, pass its best *non-empty* answer for every question and its
    no-answer score (higher = more likely no answer); then predict ``""`` where the score exceeds the threshold.

    Raises:
        UserError: as [`evaluate`][structattn.tasks.squad_eval.evaluate].
    """
    answerable = has_answer(dataset)
    if not answerable:
        raise UserError("the data holds no question; give a SQuAD file with questions")
    _check_na_probs(na_probs, [q for q in answerable if q in predictions])
    _, f1_raw = raw_scores(dataset, predictions)
    return sweep_threshold(predictions, f1_raw, na_probs, answerable)
