"""Tables and figures of the translation runs (Xu et al. 2019's Table 1, Figures 2-4, Tables 3-4).

    python -m structattn.translation.report --results-dir results

Reads ``results/nmt.jsonl`` (one line per run, written by ``experiments/record.py nmt``), re-scores every committed
hypothesis file (the test sets, and dev where a run has it) with sacreBLEU and refuses to go on when a recorded BLEU
differs; reads the gate statistics
(``results/nmt_gates/<run>.json``, `structattn.translation.gates`) and probing results
(``results/probing/<run>.json``, ``structattn probe``) that exist; writes ``results/NMT.md`` and the PNGs
``fig_nmt_delta.png`` (Table 1's Δ), ``fig_nmt_window.png`` (Figure 2), ``fig_nmt_gate_layers.png`` (Figure 3) and
``fig_nmt_gate_pos.png`` (Figure 4).

Significance (Table 1), two families, each Holm-adjusted on its own:
- over seeds, the test for Table 1's cells: each variant against the ``transformer`` on each test set, the mean over
  seeds of the paired Δ, one paired bootstrap that resamples the same sentences for all seeds
  ([`seed_paired_bootstrap`][structattn.tasks.bleu.seed_paired_bootstrap], 1,000 resamples);
- per seed: each run against the ``transformer`` run of the same seed, sacreBLEU's paired bootstrap (1,000
  resamples) on each test set.
The hybrid gate against the other locality models (the Gaussians, ``local``, ``hybrid_concat``; the paper's claim
that the gate beats them): the over-seeds test, Holm over its own cells. Runs with mechanism options (window sweep,
all-layer gate) are reported in their own sections, not in Table 1.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from ..io import read_jsonl
from ..tasks.bleu import corpus_bleu, paired_bootstrap, seed_paired_bootstrap
from ..tasks.multi30k import TEST_SPLITS, read_split
from ..train.significance import holm, mean_std

SCORED_SPLITS = (*TEST_SPLITS, "dev")  # dev: Figure 2's column
TABLE1 = [("transformer", "TRANSFORMER"), ("sperber", "+ NEIGHBOR (Sperber et al.)"),
          ("luong", "+ LOCAL_H (Luong et al.)"), ("yang", "+ LOCAL_S (Yang et al.)"), ("local", "+ LOCAL_PATTERN"),
          ("hybrid_concat", "+ HYBRID (Concat)"), ("hybrid_gate", "+ HYBRID (Gate)"),
          ("sla", "+ HYBRID (Gate) with the SLA mask (ours)")]
PROBE_COLUMNS = [("SeLn", "SeLn"), ("WC", "WC"), ("TrDep", "TDep"), ("ToCo", "ToCo*"), ("BShif", "BShif"),
                 ("Tense", "Tense"), ("SubjNum", "SubN"), ("ObjNum", "ObjN"), ("CoIn", "CoIn")]


def _hypotheses(results_dir: Path, run: dict, split: str) -> list[str]:
    return (results_dir.parent / run[f"hypotheses_{split}"]).read_text(encoding="utf-8").split("\n")[:-1]


def load_runs(results_dir: Path, references: dict[str, list[str]]) -> list[dict]:
    """Every run of ``nmt.jsonl``, its hypotheses re-scored (``_hyps[split]``); a mismatch is an error.
    ``references``: the reference lines of every split in `SCORED_SPLITS`."""
    runs = []
    for run in read_jsonl(results_dir / "nmt.jsonl"):
        run["_hyps"] = {}
        for split in SCORED_SPLITS:
            if f"hypotheses_{split}" not in run:
                continue
            hyps = _hypotheses(results_dir, run, split)
            score = round(corpus_bleu(hyps, references[split])["bleu"], 2)
            if abs(score - run[f"bleu_{split}"]) > 1e-9:
                raise ValueError(f"{run['run']}: recorded bleu_{split} {run[f'bleu_{split}']} but "
                                 f"{run[f'hypotheses_{split}']} scores {score}")
            run["_hyps"][split] = hyps
        runs.append(run)
    return runs


def _fmt(values: list[float]) -> str:
    if not values:
        return "–"
    mean, std = mean_std(values)
    return f"{mean:.2f}" if len(values) == 1 else f"{mean:.2f} ± {std:.2f}"


def _fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _table1_runs(runs: list[dict]) -> dict[str, dict[int, dict]]:
    """``{variant: {seed: run}}`` of the runs without mechanism options (those have their own sections)."""
    by = defaultdict(dict)
    for r in runs:
        if not r.get("mechanism_options"):
            by[r["variant"]][r["seed"]] = r
    return by


def table1(runs: list[dict], references: dict[str, list[str]]) -> str:
    """Table 1: BLEU per variant (mean ± std over seeds), Δ to the transformer of the same seed (mean over seeds),
    per-seed bootstrap p (Holm)."""
    by = _table1_runs(runs)
    base = by.get("transformer", {})
    p_values = {}  # (variant, seed, split) -> p; one bootstrap call per seed and test set scores its baseline once
    for seed, baseline in base.items():
        for split in TEST_SPLITS:
            systems = {v: by[v][seed]["_hyps"][split] for v, _ in TABLE1[1:]
                       if seed in by.get(v, {}) and split in by[v][seed]["_hyps"]}
            if split in baseline["_hyps"] and systems:
                tested = paired_bootstrap(baseline["_hyps"][split], systems, references[split])
                p_values.update({(v, seed, split): r["p_value"] for v, r in tested.items()})
    comparisons = [{"variant": variant, "seed": seed, "split": split, "p": p_values[variant, seed, split],
                    "delta": by[variant][seed][f"bleu_{split}"] - base[seed][f"bleu_{split}"]}
                   for variant, _ in TABLE1[1:] for seed in sorted(by.get(variant, {})) for split in TEST_SPLITS
                   if (variant, seed, split) in p_values]
    for c, adjusted in zip(comparisons, holm([c["p"] for c in comparisons])):
        c["p_holm"] = adjusted
    pooled = _pooled_comparisons(by, references, [("transformer", v) for v, _ in TABLE1[1:]])
    lines = ["| model | seeds | extra parameters | test2016 | Δ | test2017 | test2018 | mscoco2017 | tokens/s "
             "(train) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for variant, label in TABLE1:
        rows = list(by.get(variant, {}).values())
        if not rows:
            continue
        vals = {s: [r[f"bleu_{s}"] for r in rows if f"bleu_{s}" in r] for s in TEST_SPLITS}
        # paired by seed: the mean over seeds of the Δ to each seed's own transformer (the pooled test's)
        paired = [c["delta"] for c in pooled if c["variant"] == variant and c["split"] == "test2016"]
        delta = "" if variant == "transformer" else (f"{paired[0]:+.2f}" if paired else "–")
        extra = rows[0].get("model", {}).get("mechanism_parameters", "")
        speed = _fmt([r["target_tokens_per_second"] for r in rows]).split(".")[0]
        lines.append(f"| {label} | {','.join(str(r['seed']) for r in sorted(rows, key=lambda r: r['seed']))} | "
                     f"{extra} | {_fmt(vals['test2016'])} | {delta} | {_fmt(vals['test2017'])} | "
                     f"{_fmt(vals['test2018'])} | {_fmt(vals['mscoco2017'])} | {speed} |")
    out = ("\n".join(lines) + "\n\nΔ: test2016 BLEU minus the transformer's of the same seed, the mean over "
           "the variant's seeds. tokens/s: the runs' own training throughput, the mean over seeds; runs made at "
           "different times ran on different machines, so compare speed in `bench_nmt_cpu.md` (one run, "
           "interleaved), not in this column.\n")
    if pooled:
        out += ("\nOver seeds (the test for Table 1's cells): the mean over seeds of the paired Δ, one paired "
                "bootstrap whose every resample draws the same sentences for all seeds (1,000 resamples, "
                "`structattn.tasks.bleu.seed_paired_bootstrap`), Holm-adjusted over all "
                f"{len(pooled)} variant × test-set cells:\n\n" + _pooled_table(pooled, "variant", "variant"))
    if comparisons:
        out += ("\nPer seed, against the transformer of the same seed (sacreBLEU, 1,000 resamples), "
                f"Holm-adjusted over all {len(comparisons)} comparisons:\n\n"
                "| variant | seed | test set | ΔBLEU | p | p (Holm) |\n|---|---|---|---:|---:|---:|\n")
        out += "\n".join(f"| {c['variant']} | {c['seed']} | {c['split']} | {c['delta']:+.2f} | {_fmt_p(c['p'])} | "
                         f"{_fmt_p(c['p_holm'])} |" for c in comparisons) + "\n"
    return out


def delta_figure(runs: list[dict], results_dir: Path) -> str:
    """Table 1 as a plot: Δ BLEU to the same seed's transformer per variant and test set (bar: mean over seeds,
    dots: the seeds). Writes ``fig_nmt_delta.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = _table1_runs(runs)
    base = by.get("transformer", {})
    variants = [(v, label) for v, label in TABLE1[1:] if any(s in base for s in by.get(v, {}))]
    if not variants:
        return ""
    fig, ax = plt.subplots(figsize=(1.4 * len(variants) + 2, 3.4))
    width = 0.8 / len(TEST_SPLITS)
    for j, split in enumerate(TEST_SPLITS):
        xs, means = [], []
        for i, (variant, _) in enumerate(variants):
            deltas = [run[f"bleu_{split}"] - base[s][f"bleu_{split}"] for s, run in sorted(by[variant].items())
                      if s in base and f"bleu_{split}" in run and f"bleu_{split}" in base[s]]
            x = i + (j - (len(TEST_SPLITS) - 1) / 2) * width
            if deltas:
                xs.append(x)
                means.append(sum(deltas) / len(deltas))
                ax.plot([x] * len(deltas), deltas, "k.", markersize=4)
        ax.bar(xs, means, width, label=split)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(variants)))
    ax.set_xticklabels([label.replace("+ ", "").replace(" (", "\n(") for _, label in variants], fontsize=7)
    ax.set_ylabel("Δ BLEU to transformer (same seed)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(results_dir / "fig_nmt_delta.png", dpi=150)
    plt.close(fig)
    return "Δ BLEU per variant and test set (bars: mean over seeds; dots: each seed):\n\n![delta](fig_nmt_delta.png)\n"


def _pooled_comparisons(by: dict, references: dict[str, list[str]], pairs: list[tuple[str, str]]) -> list[dict]:
    """Each ``(baseline, variant)`` of ``pairs``, all seeds that both have in one test per test set, Holm over all
    the comparisons made here."""
    pooled = []
    for baseline, variant in pairs:
        base = by.get(baseline, {})
        seeds = sorted(s for s in by.get(variant, {}) if s in base)
        for split in TEST_SPLITS:
            pairs = [(base[s]["_hyps"][split], by[variant][s]["_hyps"][split]) for s in seeds
                     if split in base[s]["_hyps"] and split in by[variant][s]["_hyps"]]
            if pairs:
                result = seed_paired_bootstrap(pairs, references[split])
                pooled.append({"baseline": baseline, "variant": variant, "split": split, "delta": result["delta"], "p": result["p_value"],
                               "seeds": ",".join(str(s) for s in seeds)})
    for c, adjusted in zip(pooled, holm([c["p"] for c in pooled])):
        c["p_holm"] = adjusted
    return pooled


GATE_RIVALS = ("sperber", "luong", "yang", "local", "hybrid_concat")  # the paper's other locality models


def gate_against_rivals(runs: list[dict], references: dict[str, list[str]]) -> str:
    """The paper's claim that the hybrid gate beats the other locality models: the gate against each of
    `GATE_RIVALS` (the Gaussian baselines, window-only attention, the concatenation), pooled over the seeds
    they share (as Table 1's test), Holm over all these cells."""
    pooled = _pooled_comparisons(_table1_runs(runs), references, [(v, "hybrid_gate") for v in GATE_RIVALS])
    if not pooled:
        return ""
    return ("The hybrid gate against the other locality models, the mean over seeds of the paired Δ in one "
            "bootstrap per cell (as Table 1's \"Over seeds\"), Holm-adjusted over these "
            f"{len(pooled)} cells:\n\n" + _pooled_table(pooled, "baseline", "gate against"))


def _pooled_table(pooled: list[dict], key: str, header: str) -> str:
    """Markdown table of pooled comparisons, first column ``c[key]`` under ``header``."""
    return (f"| {header} | seeds | test set | mean ΔBLEU | p | p (Holm) |\n|---|---|---|---:|---:|---:|\n" +
            "\n".join(f"| {c[key]} | {c['seeds']} | {c['split']} | {c['delta']:+.2f} | {_fmt_p(c['p'])} | "
                      f"{_fmt_p(c['p_holm'])} |" for c in pooled) + "\n")


def _gates(results_dir: Path, run: str) -> dict | None:
    path = results_dir / "nmt_gates" / f"{run}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _against(baseline: dict, others: dict[str, dict], references: dict[str, list[str]]) -> list[dict]:
    """Each of ``others`` (``{label: run}``) against ``baseline`` on every test set, sacreBLEU's paired bootstrap
    (1,000 resamples), Holm-adjusted over all the comparisons made here."""
    comparisons = []
    for split in TEST_SPLITS:
        have = {label: r["_hyps"][split] for label, r in others.items() if split in r["_hyps"]}
        if split not in baseline["_hyps"] or not have:
            continue
        tested = paired_bootstrap(baseline["_hyps"][split], have, references[split])
        comparisons += [{"label": label, "split": split, "p": tested[label]["p_value"],
                         "delta": others[label][f"bleu_{split}"] - baseline[f"bleu_{split}"]} for label in have]
    for c, adjusted in zip(comparisons, holm([c["p"] for c in comparisons])):
        c["p_holm"] = adjusted
    order = list(others)
    return sorted(comparisons, key=lambda c: (order.index(c["label"]), TEST_SPLITS.index(c["split"])))


def _comparison_table(comparisons: list[dict], what: str) -> str:
    if not comparisons:
        return ""
    return (f"\n{what}, sacreBLEU's paired bootstrap (1,000 resamples), Holm-adjusted over these "
            f"{len(comparisons)} comparisons:\n\n| run | test set | ΔBLEU | p | p (Holm) |\n|---|---|---:|---:|---:|\n" +
            "\n".join(f"| {c['label']} | {c['split']} | {c['delta']:+.2f} | {_fmt_p(c['p'])} | "
                      f"{_fmt_p(c['p_holm'])} |" for c in comparisons) + "\n")


def _bleu_cells(run: dict) -> str:
    return " | ".join(f"{run[f'bleu_{s}']:.2f}" if f"bleu_{s}" in run else "–" for s in TEST_SPLITS)


def _dev_bleu(run: dict) -> tuple[float, str]:
    """(dev BLEU of the final model, mark): re-scored from the committed dev hypotheses where the run has them
    (mark ""), else the beam-5 dev BLEU the run recorded for the model it kept (mark "*")."""
    if "bleu_dev" in run:
        return run["bleu_dev"], ""
    return max(run["dev_bleu_beam"].values()), "*"


def figure2(runs: list[dict], results_dir: Path, references: dict[str, list[str]]) -> str:
    """Window m = 1..5 (hybrid_gate, seed 1): dev BLEU (beam 5, final model) and the mean gate of each mechanism
    layer (the paper's Figure 2), test BLEU, and each m against m = 1 on every test set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_window = {}
    for r in runs:
        opts = r.get("mechanism_options") or {}
        if r["variant"] == "hybrid_gate" and r["seed"] == 1 and not set(opts) - {"k"}:
            by_window[opts.get("k", 1)] = r
    if len(by_window) < 2:
        return ""
    points = []  # (m, dev BLEU, {layer index: mean gate} or None, dev mark)
    for m, r in sorted(by_window.items()):
        gates = _gates(results_dir, r["run"])
        dev, mark = _dev_bleu(r)
        points.append((m, dev, None if gates is None else {int(k): v for k, v in gates["layers"].items()}, mark))
    gate_layers = sorted({k for p in points if p[2] for k in p[2]})
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar([p[0] for p in points], [p[1] for p in points], color="#9bb7d4")
    ax.set_xticks([p[0] for p in points])
    ax.set_xlabel("window m (one side; the window is 2m + 1 tokens)")
    ax.set_ylabel("dev BLEU (beam 5)")
    ax.set_ylim(min(p[1] for p in points) - 2, max(p[1] for p in points) + 1)
    if gate_layers and all(p[2] is not None for p in points):
        ax2 = ax.twinx()
        for layer, style in zip(gate_layers, ("o-", "s--", "^:", "d-.")):
            ax2.plot([p[0] for p in points], [p[2].get(layer) for p in points], style, label=f"layer {layer + 1}")
        ax2.set_ylabel("mean gate (weight of local)")
        ax2.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(results_dir / "fig_nmt_window.png", dpi=150)
    plt.close(fig)

    def gate_cells(gates: dict | None) -> str:
        return " | ".join("–" if gates is None or k not in gates else f"{gates[k]:.3f}" for k in gate_layers)

    rows = "\n".join(f"| {m} | `{by_window[m]['run']}` | {dev:.2f}{mark} | {_bleu_cells(by_window[m])} | "
                      f"{gate_cells(g)} |" for m, dev, g, mark in points)
    out = ("| m | run | dev BLEU (beam 5) | " + " | ".join(TEST_SPLITS) + "".join(
               f" | mean gate, layer {k + 1}" for k in gate_layers) + " |\n"
           "|---:|---|---:|" + "---:|" * (len(TEST_SPLITS) + len(gate_layers)) + "\n" + rows +
           "\n\nDev BLEU: the final model's (the better of the best checkpoint and the average of the last five), "
           "re-scored from its committed dev hypotheses (`nmt/<run>.dev.de`; * marks a run without them, whose dev "
           "BLEU is the one it recorded); the gates: dev sources (`nmt_gates/<run>.json`).\n\n"
           "![window](fig_nmt_window.png)\n")
    if 1 in by_window:
        others = {by_window[m]["run"]: by_window[m] for m in sorted(by_window) if m != 1}
        out += _comparison_table(_against(by_window[1], others, references),
                                 f"Each window against m = 1 (`{by_window[1]['run']}`) on the test sets")
    return out


def figure3(runs: list[dict], results_dir: Path, references: dict[str, list[str]]) -> str:
    """Mean gate per encoder layer of the run with the gate in every layer (the paper's Figure 3), and its test
    BLEU against the gate in the lowest two layers of the same seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [r for r in runs if r["variant"] == "hybrid_gate" and (r.get("mechanism_options") or {}).get("layers")]
    gates = _gates(results_dir, chosen[0]["run"]) if chosen else None
    if gates is None:
        return ""
    run = chosen[0]
    layers = sorted(gates["layers"], key=int)
    values = [gates["layers"][k] for k in layers]
    fig, ax = plt.subplots(figsize=(4.5, 3))
    ax.plot([int(k) + 1 for k in layers], values, "o-")
    ax.set_xlabel("encoder layer")
    ax.set_ylabel("mean gate (weight of local)")
    fig.tight_layout()
    fig.savefig(results_dir / "fig_nmt_gate_layers.png", dpi=150)
    plt.close(fig)
    out = (f"Run `{run['run']}`:\n\n| layer | " + " | ".join(str(int(k) + 1) for k in layers) + " |\n|---|" +
           "---:|" * len(layers) + "\n| mean gate | " + " | ".join(f"{v:.3f}" for v in values) +
           " |\n\n![layers](fig_nmt_gate_layers.png)\n")
    lowest_two = _table1_runs(runs).get("hybrid_gate", {}).get(run["seed"])
    if lowest_two is not None:
        out += (f"\n| run | {' | '.join(TEST_SPLITS)} |\n|---|" + "---:|" * len(TEST_SPLITS) + "\n" +
                "\n".join(f"| `{r['run']}` | {_bleu_cells(r)} |" for r in (lowest_two, run)) + "\n")
        out += _comparison_table(_against(lowest_two, {run["run"]: run}, references),
                                 f"Every layer against the lowest two (`{lowest_two['run']}`)")
    return out


def figure4(runs: list[dict], results_dir: Path) -> str:
    """Mean gate at layer 1 per POS tag, averaged over the plain hybrid_gate runs (one bar per tag)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [r for r in runs if r["variant"] == "hybrid_gate" and not r.get("mechanism_options")]
    stats = [g for g in (_gates(results_dir, r["run"]) for r in chosen) if g is not None]
    if not stats:
        return ""
    tags = sorted({t for g in stats for t in g["pos"]})
    means = {t: sum(g["pos"][t]["mean"] for g in stats if t in g["pos"]) / sum(t in g["pos"] for g in stats)
             for t in tags}
    pieces = {t: sum(g["pos"].get(t, {}).get("pieces", 0) for g in stats) for t in tags}
    order = sorted(tags, key=lambda t: means[t])
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(order, [means[t] for t in order], color="#7aa974")
    ax.set_ylabel("mean gate, layer 1")
    ax.tick_params(axis="x", rotation=60)
    ax.set_ylim(min(means.values()) - 0.02, max(means.values()) + 0.02)
    fig.tight_layout()
    fig.savefig(results_dir / "fig_nmt_gate_pos.png", dpi=150)
    plt.close(fig)
    rows = "\n".join(f"| {t} | {means[t]:.3f} | {pieces[t]:,} |" for t in order)
    return (f"Runs: {', '.join('`' + r['run'] + '`' for r in chosen)} (dev sources).\n\n| UPOS | mean gate | pieces |\n"
            "|---|---:|---:|\n" + rows + "\n\n![pos](fig_nmt_gate_pos.png)\n")


def probing_tables(runs: list[dict], results_dir: Path) -> str:
    """Tables 3 and 4: group means and per-task test accuracy of the probes, one row per probed run, then the
    untrained-encoder controls (``probing/untrained-*.json``, from ``structattn probe --untrained``)."""
    from ..tasks.probing import GROUPS

    rows = []
    for r in runs:
        path = results_dir / "probing" / f"{r['run']}.json"
        if path.is_file():
            rows.append((r["run"], json.loads(path.read_text(encoding="utf-8"))["tasks"]))
    controls = sorted((results_dir / "probing").glob("untrained-*.json"))
    for path in controls:
        rows.append((f"{path.stem} (random weights)", json.loads(path.read_text(encoding="utf-8"))["tasks"]))
    if not rows:
        return ""
    t3 = ["| model | " + " | ".join(GROUPS) + " |", "|---|" + "---:|" * len(GROUPS)]
    t4 = ["| model | " + " | ".join(label for _, label in PROBE_COLUMNS) + " |", "|---|" + "---:|" * len(PROBE_COLUMNS)]
    for label, res in rows:
        groups = []
        for tasks in GROUPS.values():
            have = [res[t]["test_accuracy"] for t in tasks if t in res]
            groups.append(f"{sum(have) / len(have):.2f}" if have else "–")
        t3.append(f"| {label} | " + " | ".join(groups) + " |")
        t4.append(f"| {label} | " + " | ".join(f"{res[t]['test_accuracy']:.1f}" if t in res else "–"
                                                 for t, _ in PROBE_COLUMNS) + " |")
    sizes = {t: rows[0][1][t]["sizes"]["test"] for t in rows[0][1]}  # every probe reads the same UD splits
    majority = [f"{t}: {rows[0][1][t]['majority_test_accuracy']:.1f}" for t, _ in PROBE_COLUMNS if t in rows[0][1]]
    return ("Table 3 layout (group means of test accuracy):\n\n" + "\n".join(t3) +
            "\n\nTable 4 layout (test accuracy per task; * ToCo approximated from the dependency tree):\n\n" +
            "\n".join(t4) +
            f"\n\nMajority-class test accuracy: {', '.join(majority)}. Test sizes: {sizes}.\n" +
            ("\nRows marked (random weights): the named run's architecture, vocabulary and mechanism with fresh "
             "weights, drawn as training starts (`structattn probe --model DIR --untrained`): what the probe "
             "gets with no training at all.\n" if controls else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results-dir", type=Path, default=Path("results"))
    args = ap.parse_args(argv)
    references = {s: read_split(s).targets for s in SCORED_SPLITS}
    runs = load_runs(args.results_dir, references)
    sections = ["# Hybrid local/global attention for translation (Multi30k En→De)", "",
                "Generated by `python -m structattn.translation.report --results-dir results` from "
                "`results/nmt.jsonl` (runs: `python experiments/run.py nmt ...`). BLEU: detokenised, "
                "case-sensitive sacreBLEU (13a) of the committed hypothesis files; each figure re-scored here.", "",
                "## Table 1: BLEU", "", table1(runs, references), delta_figure(runs, args.results_dir)]
    for title, body in (("Gate against the other locality models", gate_against_rivals(runs, references)),
                        ("Figure 2: window size", figure2(runs, args.results_dir, references)),
                        ("Figure 3: gate per layer", figure3(runs, args.results_dir, references)),
                        ("Figure 4: gate per POS (layer 1)", figure4(runs, args.results_dir)),
                        ("Probing (Tables 3-4)", probing_tables(runs, args.results_dir))):
        if body:
            sections += [f"## {title}", "", body]
    text = "\n".join(sections).rstrip() + "\n"
    (args.results_dir / "NMT.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
