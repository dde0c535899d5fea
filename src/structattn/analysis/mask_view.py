"""Human-readable views of a word-level mask: a terminal grid and a PNG picture."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def parse_table(words: Sequence[str], heads: Sequence[int], deprels: Sequence[str], upos: Sequence[str]) -> str:
    """The parse as aligned columns: index, word, UPOS, head index (head word), label."""
    rows = [("#", "word", "upos", "head", "deprel")]
    for i, (w, h, d, u) in enumerate(zip(words, heads, deprels, upos), start=1):
        rows.append((str(i), w, u, f"{h} ({words[h - 1] if h else 'ROOT'})", d))
    widths = [max(len(r[c]) for r in rows) for c in range(5)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(r, widths)).rstrip() for r in rows)


def mask_grid(words: Sequence[str], mask: np.ndarray, on: str = "■", off: str = "·") -> str:
    """Terminal grid: one row per query word (labelled), one column per key word (numbered).

    Args:
        words: n words.
        mask: ``[n, n]`` bool, row = query.
    """
    n = len(words)
    label_w = max(len(f"{i + 1} {w}") for i, w in enumerate(words))
    col_w = len(str(n))
    header_lines = []
    for digit in range(col_w):  # column numbers written vertically so wide sentences still fit
        line = " " * (label_w + 2)
        for j in range(n):
            s = str(j + 1).rjust(col_w)
            line += s[digit] + " "
        header_lines.append(line.rstrip())
    body = []
    for i, w in enumerate(words):
        cells = " ".join(on if mask[i, j] else off for j in range(n))
        body.append(f"{f'{i + 1} {w}'.ljust(label_w)}  {cells}")
    return "\n".join(header_lines + body)


def save_mask_png(words: Sequence[str], mask: np.ndarray, path: str, title: str = "") -> None:
    """Write the mask as a picture with the words on both axes (row = query word)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(words)
    size = max(3.0, 0.32 * n + 1.5)
    fig, ax = plt.subplots(figsize=(size, size))
    ax.imshow(np.asarray(mask, dtype=float), cmap="Blues", vmin=0, vmax=1.25)
    ax.set_xticks(range(n), labels=words, rotation=90)
    ax.set_yticks(range(n), labels=words)
    ax.set_xlabel("key word (attended)")
    ax.set_ylabel("query word")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
