"""SuPar's test trees against our BNA runs: our evalb, paired bootstrap over the 518 test sentences (10,000 resamples).

    python experiments/peers/supar_vs_bna.py   (from the repository root, the library importable)
"""
from __future__ import annotations

import json
from pathlib import Path

from structattn.tasks.evalb import evalb_files
from structattn.tasks.ptb import split_files
from structattn.train.significance import paired_bootstrap_f1

RESULTS = Path(__file__).resolve().parents[2] / "results"
gold = split_files("test")


def counts(pred: Path):
    result = evalb_files(gold, pred)
    return result.to_dict(), [(s.matched, s.gold_brackets, s.test_brackets) for s in result.per_sentence]


supar_score, supar = counts(RESULTS / "peers" / "supar.test.txt")
print(json.dumps({"run": "supar-crf-char-12ep", **{k: supar_score[k] for k in ("recall", "precision", "f1")}}))
for run in ("none-bna-posnone-s1", "none-bna-posnone-s2", "none-sa-posnone-s1", "none-sa-posnone-s2"):
    score, ours = counts(RESULTS / "parsing" / f"{run}.test.trees")
    delta, p = paired_bootstrap_f1(ours, supar)
    print(json.dumps({"run": run, "f1": score["f1"], "minus_supar": round(delta, 2), "p": round(p, 4)}))
