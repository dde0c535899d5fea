"""SuPar's test trees against our BNA runs: our evalb, paired bootstrap over the 518 test sentences (10,000 resamples).

    python experiments/peers/supar_vs_bna.py               # the 12-epoch runs (results/peers/supar.test.txt)
    python experiments/peers/supar_vs_bna.py --converged   # both trained until dev F1 stopped improving, seeds 1 and 2
    python experiments/peers/supar_vs_bna.py --minilm      # both on all-MiniLM-L6-v2 fine-tuned, to convergence

(from the repository root, the library importable). One JSON line per SuPar parse, then one per (ours, SuPar) pair
with our F1, the difference and its p. With --converged the pairs are by seed (BNA seed k against SuPar seed k), then
one line for both seeds at once (the mean difference, a seed-paired bootstrap), each p also Holm-adjusted over the
lines printed; --minilm pairs the same way, our BNA on the fine-tuned encoder against SuPar's CRF parser on it, and
adds the shipped `bna-minilm-ft` parser's committed test trees against each of SuPar's parses on that encoder.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from structattn.tasks.evalb import evalb_files
from structattn.tasks.ptb import split_files
from structattn.train.significance import holm, mean_std, paired_bootstrap_f1, seed_paired_bootstrap_f1

RESULTS = Path(__file__).resolve().parents[2] / "results"


def counts(gold, pred: Path):
    """(EVALB figures, per-sentence (matched, gold, test) bracket counts) of ``pred`` against the test split."""
    result = evalb_files(gold, pred)
    return result.to_dict(), [(s.matched, s.gold_brackets, s.test_brackets) for s in result.per_sentence]


def runs(converged: bool, minilm: bool = False) -> tuple[dict[str, Path], dict[str, Path]]:
    """(ours, SuPar's): name -> committed test parse."""
    if minilm:
        return ({f"bna-minilm-ft-s{s}": RESULTS / "peers" / f"bna-minilm-ft-s{s}.test.trees" for s in (1, 2)},
                {f"supar-minilm-s{s}": RESULTS / "peers" / f"supar-minilm-s{s}.test.txt" for s in (1, 2)})
    if converged:
        return ({f"bna-converged-s{s}": RESULTS / "peers" / f"bna-converged-s{s}.test.trees" for s in (1, 2)},
                {f"supar-converged-s{s}": RESULTS / "peers" / f"supar-converged-s{s}.test.txt" for s in (1, 2)})
    return ({run: RESULTS / "parsing" / f"{run}.test.trees"
             for run in ("none-bna-posnone-s1", "none-bna-posnone-s2", "none-sa-posnone-s1", "none-sa-posnone-s2")},
            {"supar-crf-char-12ep": RESULTS / "peers" / "supar.test.txt"})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--converged", action="store_true", help="the runs trained until dev F1 stopped improving")
    parser.add_argument("--minilm", action="store_true", help="the runs on all-MiniLM-L6-v2 fine-tuned")
    args = parser.parse_args(argv)
    gold = split_files("test")
    ours, peers = runs(args.converged, args.minilm)
    scored = {name: counts(gold, path) for name, path in {**peers, **ours}.items() if path.is_file()}
    for name in (n for n in [*peers, *ours] if n not in scored):
        # the path in the repository: the line may be committed, the checkout's place is not
        print(json.dumps({"run": name, "missing": str((peers | ours)[name].relative_to(RESULTS.parent))}))
    for peer in (p for p in peers if p in scored):
        print(json.dumps({"run": peer, **{k: scored[peer][0][k] for k in ("recall", "precision", "f1")}}))
    if args.converged or args.minilm:
        shipped = RESULTS / "shipped" / "bna-minilm-ft.test.trees"
        extra = {}
        if args.minilm and shipped.is_file():
            scored["shipped bna-minilm-ft"] = counts(gold, shipped)
            extra = {"shipped bna-minilm-ft": [p for p in peers if p in scored]}
        converged(ours, peers, scored, extra)
        return
    for mine in (m for m in ours if m in scored):
        for peer in (p for p in peers if p in scored):
            delta, p = paired_bootstrap_f1(scored[mine][1], scored[peer][1])
            against = {"against": peer} if len(peers) > 1 else {}  # one peer: the committed 12-epoch file's lines
            print(json.dumps({"run": mine, **against, "f1": scored[mine][0]["f1"], "minus_supar": round(delta, 2),
                              "p": round(p, 4)}))


def converged(ours: dict[str, Path], peers: dict[str, Path], scored: dict, extra: dict | None = None) -> None:
    """BNA seed k against SuPar seed k, then both seeds at once, then each ``extra`` parse (name -> the peers it
    is compared with); p Holm-adjusted over these lines."""
    pairs = [(m, p) for m, p in zip(ours, peers) if m in scored and p in scored]
    lines = []
    for mine, peer in pairs:
        delta, p = paired_bootstrap_f1(scored[mine][1], scored[peer][1])
        lines.append({"run": mine, "against": peer, "f1": scored[mine][0]["f1"], "minus_supar": round(delta, 2),
                      "p": p})
    if len(pairs) > 1:
        delta, p = seed_paired_bootstrap_f1([(scored[m][1], scored[q][1]) for m, q in pairs])
        ours_mean, ours_std = mean_std([scored[m][0]["f1"] for m, _ in pairs])
        peer_mean, peer_std = mean_std([scored[q][0]["f1"] for _, q in pairs])
        setting = pairs[0][0].rsplit("-s", 1)[0]  # the runs' name without its seed: bna-converged, bna-minilm-ft
        lines.append({"run": f"{setting} (seeds " + ", ".join(m.rsplit("-s", 1)[1] for m, _ in pairs) + ")",
                      "f1": f"{ours_mean:.2f} ± {ours_std:.2f}", "supar_f1": f"{peer_mean:.2f} ± {peer_std:.2f}",
                      "minus_supar": round(delta, 2), "p": p})
    for mine, against in (extra or {}).items():
        for peer in against:
            delta, p = paired_bootstrap_f1(scored[mine][1], scored[peer][1])
            lines.append({"run": mine, "against": peer, "f1": scored[mine][0]["f1"], "minus_supar": round(delta, 2),
                          "p": p})
    for line, adjusted in zip(lines, holm([line["p"] for line in lines])):
        print(json.dumps({**line, "p": round(line["p"], 4), "p_holm": round(adjusted, 4)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
