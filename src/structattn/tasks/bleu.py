"""BLEU as sacreBLEU computes it, and sacreBLEU's paired bootstrap test.

Detokenised, case-sensitive corpus BLEU with sacreBLEU's default ``13a`` tokenisation, one reference per
sentence (signature ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp``). The hypotheses scored are the
lines of a committed file, so the recorded number is what ``sacrebleu REF < HYP`` prints for it.
"""
from __future__ import annotations

import functools
import os
from typing import Mapping, Sequence

from ..errors import UserError


def _check(hypotheses: Sequence[str], references: Sequence[str], what: str = "hypotheses") -> None:
    if len(hypotheses) != len(references):
        raise UserError(f"{len(hypotheses)} {what} for {len(references)} references: BLEU needs one line per "
                        "reference line")


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """``{"bleu": float, "signature": str, "details": str}`` for one system (BLEU in 0..100)."""
    from sacrebleu.metrics import BLEU

    _check(hypotheses, references)
    metric = BLEU()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return {"bleu": float(score.score), "signature": str(metric.get_signature()), "details": str(score)}


def paired_bootstrap(baseline: Sequence[str], systems: Mapping[str, Sequence[str]], references: Sequence[str],
                     samples: int = 1000, seed: int = 12345) -> dict[str, dict]:
    """sacreBLEU's paired bootstrap resampling (Koehn 2004) of each system against ``baseline``.

    Returns ``{name: {"bleu": ..., "baseline_bleu": ..., "p_value": ...}}``; p is sacreBLEU's, seed fixed:
    (1 + the number of resamples whose mean-centred |difference| exceeds the observed one) / (1 + samples).
    sacreBLEU (after multeval) counts strictly larger differences, which gives a system identical to the
    baseline the smallest p; such a system is reported with p = 1 here instead.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    _check(baseline, references, "baseline hypotheses")
    for name, hyps in systems.items():
        _check(hyps, references, f"hypotheses of {name}")
    if not systems:
        return {}
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        named = [("baseline", list(baseline))] + [(name, list(h)) for name, h in systems.items()]
        test = PairedTest(named, {"BLEU": BLEU(references=[list(references)])}, references=None, test_type="bs",
                          n_samples=samples)
        _, scores = test()
    finally:
        if previous is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = previous
    results = scores["BLEU"]
    base = float(results[0].score)
    out = {}
    for name, r in zip(scores["System"][1:], results[1:]):
        identical = list(systems[name]) == list(baseline)
        out[name] = {"bleu": float(r.score), "baseline_bleu": base, "p_value": 1.0 if identical else float(r.p_value)}
    return out


def sentence_statistics(hypotheses: Sequence[str], references: Sequence[str]):
    """BLEU's sufficient statistics per sentence, a float64 array [n, 10]: matched n-grams (n = 1..4), hypothesis
    n-grams (n = 1..4), hypothesis length, reference length. Summed over any multiset of rows they give that
    corpus's BLEU ([`bleu_from_statistics`][structattn.tasks.bleu.bleu_from_statistics]), which is what sacreBLEU's
    bootstrap resamples."""
    _check(hypotheses, references)
    # a report tests one system against several others: each system's statistics are computed once
    return _cached_statistics(tuple(hypotheses), tuple(references)).copy()


@functools.lru_cache(maxsize=256)
def _cached_statistics(hypotheses: tuple[str, ...], references: tuple[str, ...]):
    import numpy as np
    from sacrebleu.metrics import BLEU

    metric = BLEU(effective_order=True)  # only the counts are used; the option silences a per-call warning
    rows = []
    for hyp, ref in zip(hypotheses, references):
        s = metric.sentence_score(hyp, [ref])
        rows.append([*s.counts, *s.totals, s.sys_len, s.ref_len])
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), 10)


def bleu_from_statistics(stats) -> float:
    """Corpus BLEU (0..100, smoothing ``exp`` as in [`corpus_bleu`][structattn.tasks.bleu.corpus_bleu]) of summed
    statistics [10]."""
    from sacrebleu.metrics import BLEU

    counts = [int(round(x)) for x in stats]
    return float(BLEU.compute_bleu(counts[0:4], counts[4:8], counts[8], counts[9], smooth_method="exp").score)


def seed_paired_bootstrap(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], references: Sequence[str],
                          samples: int = 1000, seed: int = 12345) -> dict:
    """Paired bootstrap of a system against a baseline over several training seeds at once.

    ``pairs``: one ``(baseline_hypotheses, system_hypotheses)`` per seed, all translating the same ``references``.
    The statistic is the mean over seeds of BLEU(system) − BLEU(baseline), Table 1's Δ. Each resample draws one set
    of sentence indices and applies it to every seed (the seeds translate the same sentences, so their outputs
    are not independent samples). The p value is sacreBLEU's: (1 + the number of resamples whose mean-centred
    |Δ| exceeds the observed |Δ|) / (1 + samples); with one seed and the same ``seed`` it is exactly
    [`paired_bootstrap`][structattn.tasks.bleu.paired_bootstrap]'s, as the indices are drawn the same way.

    Returns ``{"delta": observed mean Δ, "p_value": p, "seeds": len(pairs)}``.
    """
    import numpy as np

    if not pairs:
        raise UserError("seed_paired_bootstrap needs at least one (baseline, system) pair")
    stats = []
    for baseline, system in pairs:
        _check(baseline, references, "baseline hypotheses")
        _check(system, references, "system hypotheses")
        stats.append((sentence_statistics(baseline, references), sentence_statistics(system, references)))
    if all(list(b) == list(s) for b, s in pairs):
        return {"delta": 0.0, "p_value": 1.0, "seeds": len(pairs)}  # as paired_bootstrap reports identical systems
    observed = float(np.mean([bleu_from_statistics(s.sum(0)) - bleu_from_statistics(b.sum(0)) for b, s in stats]))
    idxs = np.random.default_rng(seed).choice(len(references), size=(samples, len(references)), replace=True)
    resampled = np.zeros(samples)
    for b, s in stats:
        b_sums, s_sums = b[idxs].sum(1), s[idxs].sum(1)  # [samples, 10] each
        resampled += np.array([bleu_from_statistics(x) - bleu_from_statistics(y) for x, y in zip(s_sums, b_sums)])
    resampled = np.abs(resampled / len(stats))
    exceed = int(np.sum(resampled - resampled.mean() > abs(observed)))
    return {"delta": observed, "p_value": (exceed + 1) / (samples + 1), "seeds": len(pairs)}
