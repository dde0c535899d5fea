"""Per-label F1 of the committed test parses (518 sentences): ours against SuPar's, label by label.

    python experiments/peers/per_label.py > results/peers/per_label.jsonl     # from the repository root

One JSON line per committed parse that exists: its overall F1 and, for each label group of `GROUPS` (NP, VP, PP, S,
SBAR, SBARQ/SQ), the gold, test and matched bracket counts and recall / precision / F1, all from the library's
EVALB (`structattn score evalb --per-label` gives the same per label). `--markdown` prints the F1 table instead.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from structattn.tasks.evalb import evalb_files
from structattn.tasks.ptb import split_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from converged_summary import SETTINGS  # noqa: E402  (the paper-shape runs and their names, listed once)

RESULTS = Path(__file__).resolve().parents[2] / "results"

#: the label groups compared: the frequent phrase labels and the question clauses (SBARQ and SQ are few: summed)
GROUPS = {"NP": ("NP",), "VP": ("VP",), "PP": ("PP",), "S": ("S",), "SBAR": ("SBAR",), "SBARQ/SQ": ("SBARQ", "SQ")}

#: name -> committed test parse, ours first (trees under results/peers/ and results/shipped/)
PARSES = {
    "bna-minilm-ft-s1": "peers/bna-minilm-ft-s1.test.trees",
    "bna-minilm-ft-s2": "peers/bna-minilm-ft-s2.test.trees",
    "sa-minilm-ft-s1": "peers/sa-minilm-ft-s1.test.trees",
    "sa-minilm-ft-s2": "peers/sa-minilm-ft-s2.test.trees",
    "bna-converged-s1": "peers/bna-converged-s1.test.trees",
    "bna-converged-s2": "peers/bna-converged-s2.test.trees",
    "ablation-width-s1": "peers/ablation-width-s1.test.trees",
    "ablation-width-s2": "peers/ablation-width-s2.test.trees",
    "ablation-optimizer-s1": "peers/ablation-optimizer-s1.test.trees",
    "ablation-optimizer-s2": "peers/ablation-optimizer-s2.test.trees",
    **{name: f"peers/{name}.test.trees"  # the paper's shape at width 128 (batch 250, then the batch-32 runs)
       for _, names in SETTINGS["paper"].runs for name in (names["name"].format(seed=seed) for seed in (1, 2))},
    "supar-minilm-s1": "peers/supar-minilm-s1.test.txt",
    "supar-minilm-s2": "peers/supar-minilm-s2.test.txt",
    "supar-converged-s1": "peers/supar-converged-s1.test.txt",
    "supar-converged-s2": "peers/supar-converged-s2.test.txt",
}


def scores(path: Path) -> dict:
    """Overall F1 and the `GROUPS` scores of one committed parse against the test split."""
    result = evalb_files(split_files("test"), path)
    return {"f1": float(f"{result.f1:.2f}"), "sentences": result.sentences,
            "labels": {score.label: score.to_dict() for score in result.label_scores(GROUPS)}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print the F1 table (Markdown) instead of JSON lines")
    args = parser.parse_args(argv)
    rows = {name: scores(RESULTS / rel) for name, rel in PARSES.items() if (RESULTS / rel).is_file()}
    if not args.markdown:
        for name, row in rows.items():
            print(json.dumps({"run": name, "parse": f"results/{PARSES[name]}", **row}))
        return
    print("| parse | all | " + " | ".join(GROUPS) + " |")
    print("|---|---:|" + "---:|" * len(GROUPS))
    for name, row in rows.items():
        cells = [f"{row['labels'][g]['f1']:.2f} ({row['labels'][g]['gold_brackets']})" for g in GROUPS]
        print(f"| {name} | {row['f1']:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
