"""The SLA paper's analysis figures.

- Figure 2: mean gate value per layer (averaged over the real tokens of the dev set, then over seeds),
  SLA vs WLA, one panel per report column (a task, its training data and any setting that tells its runs
  from others, e.g. ``sst2``, ``sst2:first10000``: runs of different configurations never share a
  panel), from the runs the table selected for each cell. Read from ``best_metrics.gate_means`` of the
  runs in results/<task>.jsonl (recorded at the evaluation that gave the best checkpoint).
- Figure 3: the mixed attention of one sentence averaged over heads and layers, [CLS]/[SEP] excluded,
  sub-words merged into words (rows averaged, columns summed), side by side for several models.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .report import best_configs, column_matches, column_name

COLORS = {"SLA": "tab:red", "WLA": "tab:blue"}
PANELS_PER_ROW = 4  # Figure 2 wraps into rows beyond this


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _has_gate_values(run: dict) -> bool:
    """An SLA/WLA run without LISA that recorded its mean gate per layer (what Figure 2 plots)."""
    return (bool((run.get("best_metrics") or {}).get("gate_means"))
            and run.get("mechanism") in ("sla", "wla") and not run.get("lisa_weight"))


def _gate_cells(runs: Sequence[dict]) -> dict[tuple[str, str], list[dict]]:
    """(column, label) -> the table's selected runs of that cell that have gate values to plot."""
    cells = {cell: [r for r in b["runs"] if _has_gate_values(r)] for cell, b in best_configs(list(runs)).items()}
    return {cell: members for cell, members in cells.items() if members}


def gate_columns(runs: Sequence[dict]) -> list[str]:
    """The report columns that have gate values to plot, e.g. ``["cola", "sst2:first10000"]``."""
    return sorted({column for column, _ in _gate_cells(runs)})


def gate_curves(runs: Sequence[dict], column: str) -> dict[str, np.ndarray]:
    """label -> [seeds, layers] gate means of the SLA/WLA cells of one report column (as
    `column_ids` names it: a task, ``task:first<N>``, plus any
    distinguishing settings)."""
    return _curves(_gate_cells(runs), column)


def _curves(cells: dict[tuple[str, str], list[dict]], column: str) -> dict[str, np.ndarray]:
    curves = {}
    for (col, label), members in cells.items():
        values = [r["best_metrics"]["gate_means"] for r in members]
        if col == column and len({len(v) for v in values}) == 1:
            curves[label] = np.asarray(values, dtype=float)
    return curves


def plot_gate_means(runs: Sequence[dict], selectors: Sequence[str], path: Path) -> list[str]:
    """Write Figure 2, one panel per column with gate values that a selector names (``sst2`` names every
    column of SST-2 on its full training set, whatever its other settings); returns the columns drawn
    (empty: nothing written)."""
    cells = _gate_cells(runs)
    columns = sorted({column for column, _ in cells})
    chosen = dict.fromkeys(c for s in selectors for c in columns if column_matches(s, c))
    panels = [(c, _curves(cells, c)) for c in chosen]
    panels = [(t, c) for t, c in panels if c]
    if not panels:
        return []
    plt = _plt()
    ncols = min(len(panels), PANELS_PER_ROW)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (column, curves) in zip(axes.flat, panels):
        for label, arr in sorted(curves.items()):
            layers = np.arange(1, arr.shape[1] + 1)
            mean = arr.mean(0)
            color = COLORS.get(label.split()[0], None)
            ax.plot(layers, mean, marker="o", color=color, label=f"{label} (n={arr.shape[0]})")
            if arr.shape[0] > 1:
                ax.fill_between(layers, arr.min(0), arr.max(0), color=color, alpha=0.15)
        ax.set_title(column_name(column))
        ax.set_xlabel("layer")
        ax.set_ylabel("mean gate value g")
        ax.set_xticks(layers)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return [column for column, _ in panels]


def word_attention(probs: np.ndarray, token_word: np.ndarray, n_words: int) -> np.ndarray:
    """Merge a token attention map into words.

    Args:
        probs: ``[T, T]`` attention (row = query token), already averaged over heads and layers.
        token_word: ``[T]`` word index per token, negative for special tokens and padding.
        n_words: number of words.
    Returns:
        ``[n_words, n_words]``: rows averaged over a word's sub-words, columns summed (attention mass).
    """
    out = np.zeros((n_words, n_words))
    count = np.zeros(n_words)
    for t, wq in enumerate(token_word):
        if wq < 0:
            continue
        count[wq] += 1
        for u, wk in enumerate(token_word):
            if wk >= 0:
                out[wq, wk] += probs[t, u]
    return out / np.maximum(count, 1)[:, None]


def sentence_attention(model_dir: str, words: list[str]) -> np.ndarray:
    """Figure 3's matrix for one saved model: mixed attention averaged over heads and layers, in words."""
    import torch

    from ..attention.integration import record
    from ..trainers import load_trained
    from ..tasks.base import Example
    from ..train.features import build_features

    trainer = load_trained(model_dir)
    ex = Example(words, None, None, "figure3")  # unlabelled: only the attention is needed
    feats = build_features(trainer.task, [ex], trainer.tokenizer, trainer.structure,
                           max_length=trainer.cfg.max_length, stride=trainer.cfg.stride,
                           parser_name=trainer.cfg.parser, label_to_id=trainer.label_to_id, show_progress=False)
    _, batch, _ = next(trainer.prediction_batches(feats[:1], 1))
    model = trainer.model
    with torch.no_grad(), record(model, attentions=True) as rec:
        model(**batch)
    probs = torch.stack([a[0].float().mean(0) for a in rec.attentions]).mean(0).numpy()  # [T, T]
    return word_attention(probs, np.asarray(feats[0]["token_word"]), len(words))


def plot_attention_maps(maps: dict[str, np.ndarray], words: list[str], path: Path) -> None:
    """Write Figure 3: one heatmap per model, words on both axes."""
    plt = _plt()
    n = len(words)
    fig, axes = plt.subplots(1, len(maps), figsize=(0.34 * n * len(maps) + 2, 0.34 * n + 1.5), squeeze=False)
    vmax = max(float(m.max()) for m in maps.values())
    for ax, (label, mat) in zip(axes[0], maps.items()):
        ax.imshow(mat, cmap="Reds", vmin=0, vmax=vmax)
        ax.set_xticks(range(n), labels=words, rotation=90)
        ax.set_yticks(range(n), labels=words)
        ax.set_title(label)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
