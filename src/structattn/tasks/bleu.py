"""BLEU as sacreBLEU computes it, and sacreBLEU's paired bootstrap test.

Detokenised, case-sensitive corpus BLEU with sacreBLEU's default ``13a`` tokenisation, one reference per
sentence (signature ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp``). The hypotheses scored are the
lines of a committed file, so the recorded number is what ``sacrebleu REF < HYP`` prints for it.
"""
from __future__ import annotations

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
