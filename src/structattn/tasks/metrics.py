"""Metrics equivalent to each benchmark's official scorer.

Every function returns a ``dict[str, float]``. Scores are **fractions in [0, 1]** (multiply by
100 for the percentages papers print); correlations lie in [-1, 1].

=========================  ==========================================================  ==================
task                       official scorer                                             here
=========================  ==========================================================  ==================
SST-2, RTE, QNLI, WNLI     GLUE accuracy                                               `accuracy`
CoLA                       GLUE Matthews correlation (``sklearn.matthews_corrcoef``)   `matthews`
MRPC                       GLUE accuracy and F1 of class 1 (paraphrase)                `accuracy_f1`
STS-B                      GLUE Pearson and Spearman correlation (scipy)               `correlations`
CoNLL-2003 NER             conlleval / seqeval: entity-level micro P, R, F1            `entity_prf`
FCE error detection        token-level P, R, F0.5 of the incorrect class ``i``         `token_prf`
UD POS                     token accuracy                                              `token_accuracy`
=========================  ==========================================================  ==================

Zero-division rule (all P/R/F here): a precision with no predicted positives, a recall with no
gold positives, and an F whose denominator is 0 are **0.0** (conlleval's and sklearn's
``zero_division=0`` rule). A correlation that is undefined because one side is constant is
reported as 0.0 rather than NaN (as ``matthews_corrcoef`` does), so checkpoint selection keeps
working; a warning is not raised.

Entities (CoNLL-2003)
---------------------
Two readings of a tag sequence exist, and they only differ on *ill-formed* sequences (an
``I-X`` that does not continue an ``X`` entity):

* **strict IOB2** (seqeval ``mode="strict", scheme=IOB2``): an entity is ``B-X`` followed by the
  longest run of ``I-X``; a stray ``I-X`` is no entity at all.
* **conlleval** (the CoNLL-2000 perl script; seqeval's default mode): a stray ``I-X`` *starts* an
  entity, and ``B-X I-Y`` is two entities.

The library reports strict IOB2 as ``precision``/``recall``/``f1`` (``main_metric`` = ``f1``) and
the conlleval reading as ``conlleval_precision``/``conlleval_recall``/``conlleval_f1``. The CoNLL-2003
gold files are valid IOB2 (the reader checks it), so the two are equal whenever the predictions are
valid IOB2 too, e.g. with constrained decoding. Both are computed by `chunks_strict_iob2` and
`chunks_conlleval` (small re-implementations) and, for the reported numbers, by seqeval; the
tests check that they agree.
"""
from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

# --------------------------------------------------------------------------------------------
# shared pieces


def _as_list(values, name: str) -> list:
    if isinstance(values, np.ndarray):
        return values.tolist()
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of labels, not a string")
    return list(values)


def _check_pair(predictions, references) -> tuple[list, list]:
    p = _as_list(predictions, "predictions")
    r = _as_list(references, "references")
    if len(p) != len(r):
        raise ValueError(f"{len(p)} predictions but {len(r)} references")
    if not r:
        raise ValueError("no references to score")
    if any(x is None for x in r):
        raise ValueError("references contain None (unlabelled split); score the dev split instead")
    return p, r


def _check_sequences(predictions, references) -> tuple[list[list[str]], list[list[str]]]:
    p, r = _check_pair(predictions, references)
    p = [_as_list(s, "predictions[i]") for s in p]
    r = [_as_list(s, "references[i]") for s in r]
    for i, (ps, rs) in enumerate(zip(p, r)):
        if len(ps) != len(rs):
            raise ValueError(f"sequence {i}: {len(ps)} predicted tags but {len(rs)} reference tags")
    return p, r


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den else 0.0


def f_beta(precision: float, recall: float, beta: float = 1.0) -> float:
    """``(1 + b^2) P R / (b^2 P + R)``; 0.0 when the denominator is 0."""
    b2 = beta * beta
    den = b2 * precision + recall
    return (1.0 + b2) * precision * recall / den if den > 0 else 0.0


# --------------------------------------------------------------------------------------------
# sentence classification and regression


def accuracy(predictions: Sequence[int], references: Sequence[int]) -> dict[str, float]:
    """Fraction of predictions equal to the reference. Returns ``{"accuracy"}``."""
    p, r = _check_pair(predictions, references)
    return {"accuracy": sum(int(a == b) for a, b in zip(p, r)) / len(r)}


def matthews(predictions: Sequence[int], references: Sequence[int]) -> dict[str, float]:
    """Matthews correlation (GLUE CoLA; ``sklearn.metrics.matthews_corrcoef``, 0.0 when undefined).

    Returns ``{"mcc", "accuracy"}``.
    """
    from sklearn.metrics import matthews_corrcoef

    p, r = _check_pair(predictions, references)
    return {"mcc": float(matthews_corrcoef(r, p)), **accuracy(p, r)}


def f1_binary(predictions: Sequence[int], references: Sequence[int], positive: int = 1) -> float:
    """F1 of class ``positive`` (GLUE MRPC: class 1 = paraphrase); 0.0 when undefined."""
    p, r = _check_pair(predictions, references)
    tp = sum(1 for a, b in zip(p, r) if a == positive and b == positive)
    fp = sum(1 for a, b in zip(p, r) if a == positive and b != positive)
    fn = sum(1 for a, b in zip(p, r) if a != positive and b == positive)
    return f_beta(_ratio(tp, tp + fp), _ratio(tp, tp + fn))


def accuracy_f1(predictions: Sequence[int], references: Sequence[int]) -> dict[str, float]:
    """GLUE MRPC: ``{"accuracy", "f1", "acc_and_f1"}`` (F1 of class 1; acc_and_f1 = their mean)."""
    acc = accuracy(predictions, references)["accuracy"]
    f1 = f1_binary(predictions, references, positive=1)
    return {"accuracy": acc, "f1": f1, "acc_and_f1": (acc + f1) / 2}


def correlations(predictions: Sequence[float], references: Sequence[float]) -> dict[str, float]:
    """GLUE STS-B: ``{"pearson", "spearman", "corr"}`` (scipy; corr = their mean).

    A constant side makes both correlations undefined; they are reported as 0.0.
    """
    from scipy.stats import pearsonr, spearmanr

    p, r = _check_pair(predictions, references)
    p = np.asarray(p, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    if not (np.isfinite(p).all() and np.isfinite(r).all()):
        raise ValueError("predictions and references must be finite numbers")
    if len(r) < 2 or np.ptp(p) == 0 or np.ptp(r) == 0:
        pe = sp = 0.0
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pe = float(pearsonr(p, r)[0])
            sp = float(spearmanr(p, r)[0])
        pe = 0.0 if math.isnan(pe) else pe
        sp = 0.0 if math.isnan(sp) else sp
    return {"pearson": pe, "spearman": sp, "corr": (pe + sp) / 2}


# --------------------------------------------------------------------------------------------
# entity chunks (IOB tags)

_TAG = re.compile(r"^([BI])-(.+)$")


def split_tag(tag: str) -> tuple[str, str]:
    """``"B-PER" -> ("B", "PER")``, ``"O" -> ("O", "")``; anything else raises ValueError."""
    if tag == "O":
        return "O", ""
    m = _TAG.match(tag) if isinstance(tag, str) else None
    if m is None:
        raise ValueError(f"tag {tag!r} is not O, B-<type> or I-<type>")
    return m.group(1), m.group(2)


def chunks_strict_iob2(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Entities of one sentence under strict IOB2, as ``(type, start, end)`` with ``end`` exclusive.

    An entity is ``B-X`` followed by the longest run of ``I-X``. An ``I-X`` that does not
    continue an ``X`` entity belongs to no entity.
    """
    out = []
    i, n = 0, len(tags)
    while i < n:
        prefix, kind = split_tag(tags[i])
        if prefix != "B":
            i += 1
            continue
        j = i + 1
        while j < n and split_tag(tags[j]) == ("I", kind):
            j += 1
        out.append((kind, i, j))
        i = j
    return out


def chunks_conlleval(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Entities of one sentence as conlleval reads them, ``(type, start, end)``, end exclusive.

    This is the start/end-of-chunk logic of the CoNLL-2000 ``conlleval`` perl script restricted to
    B/I/O tags, with the sentence boundary acting as ``O``: a chunk starts at every ``B``, at an
    ``I`` after ``O``, and wherever the type changes; it ends before ``B``, ``O`` or a type change.
    """
    out = []
    start = None
    prev_prefix, prev_kind = "O", ""
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = split_tag(tag)
        ends = prev_prefix != "O" and (prefix in ("B", "O") or prev_kind != kind)
        starts = prefix == "B" or (prefix == "I" and (prev_prefix == "O" or prev_kind != kind))
        if ends and start is not None:
            out.append((prev_kind, start, i))
            start = None
        if starts:
            start = i
        prev_prefix, prev_kind = prefix, kind
    return out


def count_chunks(predictions: Iterable[Sequence[str]], references: Iterable[Sequence[str]],
                 chunker=chunks_strict_iob2) -> dict[str, Counter]:
    """Per entity type: ``{"correct", "predicted", "gold"}`` counters over all sentences.

    A predicted entity is correct when an entity of the same type spans exactly the same tokens
    in the reference (conlleval's rule).
    """
    correct, predicted, gold = Counter(), Counter(), Counter()
    for ps, rs in zip(predictions, references):
        pc = set(chunker(ps))
        rc = set(chunker(rs))
        predicted.update(k for k, _, _ in pc)
        gold.update(k for k, _, _ in rc)
        correct.update(k for k, _, _ in pc & rc)
    return {"correct": correct, "predicted": predicted, "gold": gold}


def prf_from_counts(counts: dict[str, Counter]) -> dict[str, float]:
    """Micro P/R/F1 over all types plus ``f1_<TYPE>`` per type, from `count_chunks`."""
    c, p, g = (sum(counts[k].values()) for k in ("correct", "predicted", "gold"))
    prec, rec = _ratio(c, p), _ratio(c, g)
    out = {"precision": prec, "recall": rec, "f1": f_beta(prec, rec)}
    for kind in sorted(set(counts["predicted"]) | set(counts["gold"])):
        kp = _ratio(counts["correct"][kind], counts["predicted"][kind])
        kr = _ratio(counts["correct"][kind], counts["gold"][kind])
        out[f"f1_{kind}"] = f_beta(kp, kr)
    return out


def seqeval_prf(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]],
                strict: bool = True) -> dict[str, float]:
    """Micro P/R/F1 from seqeval: strict IOB2 (``strict=True``) or its conlleval-like default mode."""
    from seqeval.metrics import f1_score, precision_score, recall_score
    from seqeval.scheme import IOB2

    p, r = _check_sequences(predictions, references)
    for seqs in (p, r):
        for s in seqs:
            for t in s:
                split_tag(t)  # seqeval silently accepts tags like "PER"; reject them here
    kw = {"mode": "strict", "scheme": IOB2} if strict else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "precision": float(precision_score(r, p, zero_division=0, **kw)),
            "recall": float(recall_score(r, p, zero_division=0, **kw)),
            "f1": float(f1_score(r, p, zero_division=0, **kw)),
        }


def entity_prf(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """CoNLL-2003 NER scores: entity-level micro P/R/F1.

    Returns ``precision``, ``recall``, ``f1`` (strict IOB2, equal to seqeval
    ``mode="strict", scheme=IOB2``), ``f1_<TYPE>`` per entity type (strict), and
    ``conlleval_precision``, ``conlleval_recall``, ``conlleval_f1`` (the conlleval reading, equal to
    seqeval's default mode and the perl script). See the module docstring for where they differ.
    """
    p, r = _check_sequences(predictions, references)
    strict = prf_from_counts(count_chunks(p, r, chunks_strict_iob2))
    loose = prf_from_counts(count_chunks(p, r, chunks_conlleval))
    out = dict(strict)
    out.update({"conlleval_precision": loose["precision"], "conlleval_recall": loose["recall"],
                "conlleval_f1": loose["f1"]})
    return out


# --------------------------------------------------------------------------------------------
# token-level scores


def token_prf(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]],
              positive: str = "i", beta: float = 0.5) -> dict[str, float]:
    """Token-level precision, recall and F-beta of class ``positive`` (FCE error detection).

    ``P = TP / (TP + FP)``, ``R = TP / (TP + FN)``, ``F0.5 = 1.25 P R / (0.25 P + R)`` (beta = 0.5
    weighs precision twice as much as recall, as in Rei & Yannakoudakis 2016 and MultiGED-2023);
    each is 0.0 when its denominator is 0. Returns ``{"precision", "recall", "f0.5", "accuracy"}``
    (the key is ``f<beta>``, e.g. ``f1`` for beta = 1; accuracy is over all tokens).
    """
    p, r = _check_sequences(predictions, references)
    tp = fp = fn = same = total = 0
    for ps, rs in zip(p, r):
        for a, b in zip(ps, rs):
            tp += a == positive and b == positive
            fp += a == positive and b != positive
            fn += a != positive and b == positive
            same += a == b
            total += 1
    prec, rec = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    return {"precision": prec, "recall": rec, f"f{beta:g}": f_beta(prec, rec, beta), "accuracy": _ratio(same, total)}


def token_accuracy(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Fraction of tokens whose tag equals the reference (POS tagging). Returns ``{"accuracy"}``."""
    p, r = _check_sequences(predictions, references)
    total = sum(len(s) for s in r)
    same = sum(int(a == b) for ps, rs in zip(p, r) for a, b in zip(ps, rs))
    return {"accuracy": _ratio(same, total)}
