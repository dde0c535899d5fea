"""Dev F1 after every epoch of each parser ablation toward SuPar's recipe (results/peers/ablations.jsonl), beside
the best dev F1 of the run each one changes (results/peers/converged_runs.jsonl, BNA seed 1), as a PNG; with
``--paper``, of the paper-shape runs (results/peers/paper_d128_runs.jsonl) beside the same line.

    python experiments/peers/ablation_curves.py [results/peers/ablation_dev_curves.png]
    python experiments/peers/ablation_curves.py --paper [results/peers/paper_d128_dev_curves.png]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "results"


def lines(name: str) -> list[dict]:
    """The lines of ``results/peers/NAME``."""
    return [json.loads(x) for x in (RESULTS / "peers" / name).read_text(encoding="utf-8").splitlines()]


def main(argv: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paper = "--paper" in argv
    argv = [a for a in argv if a != "--paper"]
    runs_file, default_png, unchanged = (
        ("paper_d128_runs.jsonl", "paper_d128_dev_curves.png", "the small shape") if paper
        else ("ablations.jsonl", "ablation_dev_curves.png", "unchanged recipe"))
    out = Path(argv[0]) if argv else RESULTS / "peers" / default_png
    (base,) = [x for x in lines("converged_runs.jsonl") if x["run"] == "bna-converged-s1"]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    runs = lines(runs_file)
    colours = plt.get_cmap("tab20").colors  # one colour a run: more runs than the default cycle's ten
    for k, run in enumerate(runs):
        curve = run["dev_f1_by_epoch"]
        ax.plot(range(1, len(curve) + 1), curve, lw=1, color=colours[k % len(colours)],
                label=f"{run['run']}: best {run['best_dev_f1']:.2f} (epoch {run['best_epoch']}), test {run['test_f1']:.2f}")
    ax.axhline(base["best_dev_f1"], color="black", ls=":", lw=1,
               label=f"{base['run']} ({unchanged}): best {base['best_dev_f1']:.2f} (epoch {base['best_epoch']}), "
                     f"test {base['test_f1']:.2f}")
    ax.set_ylim(50 if paper else 60, 86)
    ax.set_xlabel("epoch")
    ax.set_ylabel("dev F1")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(out, dpi=120, metadata={"Software": None})
    plt.close(fig)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
