"""Committed test parses against each other: our evalb, paired bootstrap over the 518 test sentences (10,000
resamples), p Holm-adjusted over the lines printed.

    python experiments/peers/paired.py bna-minilm-ft-s1:sa-minilm-ft-s1 bna-minilm-ft-s2:sa-minilm-ft-s2 \
        --seed-paired > results/peers/bna_vs_sa_minilm.jsonl
    python experiments/peers/paired.py ablation-dropout-s1:bna-converged-s1 ablation-lr-s1:bna-converged-s1 \
        ablation-width-s1:bna-converged-s1 > results/peers/ablations_vs_bna.jsonl
    python experiments/peers/paired.py paper-d128-bimsa:paper-d128-sa paper-d128-sa_nsa:paper-d128-sa \
        paper-d128-bna:paper-d128-sa paper-d128-bna:paper-d128-sa_nsa paper-d128-bna:paper-d128-bimsa \
        --seeds 1 2 > results/peers/paper_d128_ablation.jsonl

(from the repository root, the library importable). Each argument ``A:B`` is a pair, named by the committed parses
``results/peers/A.test.trees`` (or ``.test.txt``, SuPar's) and B: one line with A's F1, B's, A minus B and its p.
``--seed-paired``: one more line for all the pairs at once (the mean difference, a bootstrap that resamples the
same sentences in every pair: the pairs are seeds of one comparison). ``--seeds S ...``: each pair names two runs
without their seed, and stands for the runs ``A-sS:B-sS`` of every seed S, followed by their seed-paired line (so
several comparisons, each over the same seeds, in one family). A pair whose parse is not committed is named in a line
of its own and left out.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from structattn.tasks.ptb import split_files
from structattn.train.significance import holm, mean_std, paired_bootstrap_f1, seed_paired_bootstrap_f1

sys.path.insert(0, str(Path(__file__).resolve().parent))
from supar_vs_bna import counts  # noqa: E402  (the bracket counts every parse comparison bootstraps over)

RESULTS = Path(__file__).resolve().parents[2] / "results"


def parse_file(name: str) -> Path:
    """The committed test parse of run ``name`` (ours ``.test.trees``, SuPar's ``.test.txt``)."""
    for suffix in (".test.trees", ".test.txt"):
        path = RESULTS / "peers" / f"{name}{suffix}"
        if path.is_file():
            return path
    return RESULTS / "peers" / f"{name}.test.trees"


def scored(gold, name: str) -> tuple[float, list[tuple[int, int, int]]]:
    """(F1, per-sentence (matched, gold, test) bracket counts) of run ``name``'s parse against the test split."""
    figures, sentences = counts(gold, parse_file(name))
    return figures["f1"], sentences


def compared(scores: dict, pairs: list[tuple[str, str]]) -> dict:
    """One line for several seeds of one comparison: the runs' mean F1 ± sd and the seed-paired bootstrap."""
    delta, p = seed_paired_bootstrap_f1([(scores[a][1], scores[b][1]) for a, b in pairs])
    mine_mean, mine_std = mean_std([scores[a][0] for a, _ in pairs])
    other_mean, other_std = mean_std([scores[b][0] for _, b in pairs])
    return {"run": " + ".join(a for a, _ in pairs), "against": " + ".join(b for _, b in pairs),
            "f1": f"{mine_mean:.2f} ± {mine_std:.2f}", "against_f1": f"{other_mean:.2f} ± {other_std:.2f}",
            "difference": round(delta, 2), "p": p}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="+", metavar="A:B", help="run A against run B (committed parse names)")
    parser.add_argument("--seed-paired", action="store_true", help="also all pairs at once (seeds of one comparison)")
    parser.add_argument("--seeds", nargs="+", type=int, metavar="S",
                        help="each pair names runs without their seed: A-sS:B-sS for every S, then their "
                             "seed-paired line")
    args = parser.parse_args(argv)
    if args.seeds and args.seed_paired:
        parser.error("--seeds already pairs each comparison's seeds: leave out --seed-paired")
    groups = []  # the comparisons: each a list of (A, B) run pairs pooled into one seed-paired line
    for text in args.pairs:
        mine, sep, other = text.partition(":")
        if not sep or not mine or not other:
            parser.error(f"{text!r}: give each pair as A:B (two run names)")
        groups.append([(f"{mine}-s{seed}", f"{other}-s{seed}") for seed in args.seeds] if args.seeds
                      else [(mine, other)])
    if args.seed_paired:
        groups = [[pair for group in groups for pair in group]]
    pairs = [pair for group in groups for pair in group]
    gold = split_files("test")
    names = dict.fromkeys(name for pair in pairs for name in pair)
    missing = [name for name in names if not parse_file(name).is_file()]
    for name in missing:
        print(json.dumps({"run": name, "missing": str(parse_file(name).relative_to(RESULTS.parent))}))
    scores = {name: scored(gold, name) for name in names if name not in missing}
    lines = []
    for group in groups:
        group = [(a, b) for a, b in group if a in scores and b in scores]
        for mine, other in group:
            delta, p = paired_bootstrap_f1(scores[mine][1], scores[other][1])
            lines.append({"run": mine, "against": other, "f1": scores[mine][0], "against_f1": scores[other][0],
                          "difference": round(delta, 2), "p": p})
        if len(group) > 1:
            lines.append(compared(scores, group))
    for line, adjusted in zip(lines, holm([line["p"] for line in lines])):
        print(json.dumps({**line, "p": round(line["p"], 4), "p_holm": round(adjusted, 4)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
