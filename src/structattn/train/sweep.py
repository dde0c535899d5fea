"""Grids of runs over seeds, appended to ``results/<task>.jsonl`` one line per run.

A variant is written ``name[:opt=value,...]``: ``global``, ``sla:m=3``, ``wla:k=4``,
``lisa:w=1.0`` (plain attention + LISA supervision), ``sla:m=3,w=0.5`` (SLA + LISA).
"""
from __future__ import annotations

import itertools
import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from ..errors import UserError
from .checkpoint import append_jsonl
from .config import TrainConfig

VARIANT_NAMES = {"global", "sla", "wla", "hybrid", "sdoi", "lisa"}


def parse_variant(text: str) -> dict:
    """``"sla:m=3"`` -> ``{"mechanism": "sla", "m": 3}``; ``"lisa:w=1"`` -> global + lisa_weight 1."""
    name, _, opts = text.partition(":")
    if name not in VARIANT_NAMES:
        raise UserError(f"unknown variant {name!r} in {text!r}; valid: {', '.join(sorted(VARIANT_NAMES))}")
    out: dict = {"mechanism": "global" if name == "lisa" else name}
    if name == "lisa":
        out["lisa_weight"] = 1.0
    for part in filter(None, opts.split(",")):
        key, eq, value = part.partition("=")
        if not eq:
            raise UserError(f"variant {text!r}: option {part!r} must look like key=value")
        if key == "m":
            out["m"] = int(value)
        elif key == "k":
            out["k"] = int(value)
        elif key == "w":
            out["lisa_weight"] = float(value)
        elif key == "bias":
            out["gate_bias"] = float(value)
        else:
            raise UserError(f"variant {text!r}: unknown option {key!r} (m, k, w, bias)")
    return out


def variant_label(record: dict) -> str:
    """The display name of a run's variant, e.g. ``SLA (m=3)``, ``WLA (k=4)``, ``LISA (w=1)``."""
    mech = record.get("mechanism", "global")
    lisa = record.get("lisa_weight") or 0
    if mech == "global":
        base = "baseline" if not lisa else f"LISA (w={lisa:g})"
    elif mech == "sla":
        base = f"SLA (m={record.get('m') if record.get('m') is not None else 3})"
    elif mech == "wla":
        base = f"WLA (k={record.get('k') if record.get('k') is not None else 3})"
    else:
        base = mech
    if lisa and mech != "global":
        base += f" + LISA (w={lisa:g})"
    return base


def run_grid(base: TrainConfig, variants: list[str], seeds: list[int], learning_rates: list[float],
             epochs: list[float], results_dir: Path, run_root: Path, *, command: str | None = None,
             skip_done: bool = True) -> list[dict]:
    """Run every (seed, variant, lr, epochs) combination; append each result as one JSON line."""
    from .loop import Trainer

    results_dir = Path(results_dir)
    out_file = results_dir / f"{base.task}.jsonl"
    done = _done_keys(out_file) if skip_done else set()
    command = command or " ".join(shlex.quote(a) for a in sys.argv)
    summaries = []
    # Seeds outermost: a sweep stopped part-way has every variant on its first seeds, not one variant on all.
    for seed, variant, lr, ep in itertools.product(seeds, variants, learning_rates, epochs):
        opts = parse_variant(variant)
        name = f"{base.task}-{variant.replace(':', '_').replace(',', '_').replace('=', '')}-lr{lr}-ep{ep}-s{seed}"
        name += (f"-n{base.max_train_examples}" if base.max_train_examples else "") + \
            ("-grouped" if base.group_by_length else "")
        cfg = replace(base, learning_rate=lr, epochs=ep, seed=seed, output_dir=str(run_root / name), **opts)
        key = _key(cfg)
        if key in done:
            print(f"skip (already in {out_file}): {name}", file=sys.stderr)
            continue
        t0 = time.time()
        summary = Trainer(cfg).train()
        summary.update(variant=variant, label=variant_label(summary), wall_s=round(time.time() - t0, 1),
                       command=command, max_train_examples=cfg.max_train_examples, batch_size=cfg.batch_size,
                       max_length=cfg.max_length, group_by_length=cfg.group_by_length, finished_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        append_jsonl(out_file, summary)
        summaries.append(summary)
        print(f"{name}: {summary['main_metric']}={summary['best']:.4f}", file=sys.stderr)
    return summaries


def _key(cfg_or_record) -> tuple:
    get = (lambda k: getattr(cfg_or_record, k, None)) if not isinstance(cfg_or_record, dict) else cfg_or_record.get
    return (get("task"), get("mechanism"), get("m"), get("k"), float(get("lisa_weight") or 0),
            float(get("learning_rate")), float(get("epochs")), int(get("seed")), int(get("max_train_examples") or 0),
            bool(get("group_by_length")))


def _done_keys(path: Path) -> set:
    if not path.is_file():
        return set()
    keys = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            keys.add(_key(json.loads(line)))
    return keys
