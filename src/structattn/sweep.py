"""Grids of runs over seeds, appended to ``results/<task>.jsonl`` one line per run.

A variant is written ``name[:opt=value,...]``: ``global``, ``sla:m=3``, ``wla:k=4``,
``lisa:w=1.0`` (plain attention + LISA supervision), ``sla:m=3,w=0.5`` (SLA + LISA),
``sla:m=3,bias=-2`` (another initial gate bias), ``sgnet`` (plain attention + SG-Net's syntax-guided layer on
top, dual aggregation with alpha 0.5), ``sgnet:agg=concat`` / ``sgnet:alpha=learned`` / ``sgnet:init=copy``, and
``sla:m=3,sg=dual`` (SLA inside the encoder + the SG-Net layer on top).

Every line records the run's whole configuration (``config``) and its `config_key`
(``config_key``): a run is skipped only when a line with the same key (every field that changes results)
is in the file. Lines written before ``config`` was recorded get theirs from what they do record
(`record_config`).
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from .errors import UserError
from .io import upsert_jsonl
from .sgnet.names import AGGREGATIONS, INITS
from .run_config import RunConfig
from .train.config import add_config_arguments, config_key, given_flags, mechanism_options, result_fields

VARIANT_NAMES = {"global", "sla", "wla", "hybrid", "sdoi", "lisa", "sgnet"}
SGNET_AGGREGATIONS = AGGREGATIONS  # the names of the SG-Net layer's registry


def parse_variant(text: str) -> dict:
    """``"sla:m=3"`` -> ``{"mechanism": "sla", "m": 3}``; ``"lisa:w=1"`` -> global + lisa_weight 1."""
    name, _, opts = text.partition(":")
    if name not in VARIANT_NAMES:
        raise UserError(f"unknown variant {name!r} in {text!r}; valid: {', '.join(sorted(VARIANT_NAMES))}")
    out: dict = {"mechanism": "global" if name in ("lisa", "sgnet") else name}
    if name == "lisa":
        out["lisa_weight"] = 1.0
    if name == "sgnet":
        out["sgnet"] = "dual"
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
        elif key in ("sg", "agg"):
            if value not in SGNET_AGGREGATIONS:
                raise UserError(f"variant {text!r}: {key}={value!r}; valid aggregations: "
                                f"{', '.join(SGNET_AGGREGATIONS)}")
            out["sgnet"] = value
        elif key == "alpha" and out.get("sgnet"):
            out["sgnet_alpha"] = None if value == "learned" else float(value)
        elif key == "init" and out.get("sgnet"):
            if value not in INITS:
                raise UserError(f"variant {text!r}: init={value!r}; valid: {', '.join(INITS)}")
            out["sgnet_init"] = value
        else:
            raise UserError(f"variant {text!r}: unknown option {key!r} (m, k, w, bias; sg or agg, then alpha, "
                            "init for the SG-Net layer)")
    return out


DISPLAY_NAMES = {"global": "baseline", "sla": "SLA", "wla": "WLA"}
MAIN_OPTION = {"sla": "m", "wla": "k", "hybrid": "k"}  # always in the label, as the papers name their variants


def variant_label(record: dict) -> str:
    """The display name of a run's variant, e.g. ``SLA (m=3)``, ``WLA (k=4)``, ``LISA (w=1)``,
    ``SLA (m=3, bias=-2) + LISA (w=0.1)``: the mechanism's main option, every other variant option
    (m, k, initial gate bias) that differs from the mechanism's default, and the LISA weight."""
    mech = record.get("mechanism", "global")
    lisa = record.get("lisa_weight") or 0
    values = mechanism_options(mech, record.get("m"), record.get("k"), record.get("gate_bias"))
    defaults = mechanism_options(mech)
    main = MAIN_OPTION.get(mech)
    opts = [f"{n}={values[n]}" for n in sorted(("m", "k"), key=lambda n: n != main)
            if n == main or values[n] != defaults[n]]
    if values["gate_bias"] != defaults["gate_bias"]:
        opts.append(f"bias={values['gate_bias']:g}")
    name = DISPLAY_NAMES.get(mech, mech)
    if mech == "global" and lisa:  # plain attention + LISA is the LISA row
        name, opts, lisa = "LISA", [f"w={lisa:g}"] + opts, 0
    label = name + (f" ({', '.join(opts)})" if opts else "")
    label += f" + LISA (w={lisa:g})" if lisa else ""
    sg = sgnet_label(record)
    if sg:
        label = sg if label == "baseline" else f"{label} + {sg}"
    return label


def sgnet_label(record: dict) -> str:
    """``SG-Net`` for the paper's SG-Net (dual, alpha 0.5, fresh layer), with what differs in brackets
    (``SG-Net (concat)``, ``SG-Net (alpha learned, init copy)``); "" without an SG-Net layer."""
    agg = record.get("sgnet") or "none"
    if agg == "none":
        return ""
    opts = [] if agg == "dual" else [agg]
    alpha = record.get("sgnet_alpha", 0.5)
    if agg == "dual" and alpha != 0.5:
        opts.append("alpha learned" if alpha is None else f"alpha={alpha:g}")
    if record.get("sgnet_init", "fresh") != "fresh":
        opts.append(f"init {record['sgnet_init']}")
    return "SG-Net" + (f" ({', '.join(opts)})" if opts else "")


# Before --long-inputs, long examples became overlapping token windows that could start inside a word. No
# run can ask for that any more, so it is its own value: such lines never share a key with today's
# word-aligned ``windows`` runs.
LEGACY_WINDOWS = "token-windows-before-0.2"

# Values in force for fields a line does not record: older lines predate these fields, or recorded the
# offline default model by name. A field neither recorded nor listed here takes RunConfig's default, so
# whoever changes a default, or adds a field that changes results, adds the earlier behaviour here.
_UNRECORDED = {"gate_bias": None, "stride": 32, "model": "", "group_by_length": False,
               "long_inputs": LEGACY_WINDOWS}
_OFFLINE_MODEL_NAME = "all-MiniLM-L6-v2"  # what lines without ``config`` record for model ""


def record_config(record: dict, source: str = "results line") -> RunConfig:
    """The configuration of one results line: its ``config`` where recorded, else rebuilt from the fields
    and the ``structattn`` command line it records, with `_UNRECORDED` for what it lacks."""
    names = {f.name for f in dataclasses.fields(RunConfig)}
    data = dataclasses.asdict(RunConfig()) | {k: v for k, v in _UNRECORDED.items() if k in names}
    if "config" in record:
        return RunConfig.from_dict(data | record["config"], source=source)
    data |= _command_flags(record.get("command") or "", source)
    data |= {k: v for k, v in record.items() if k in names}
    if data["model"] == _OFFLINE_MODEL_NAME:
        data["model"] = ""
    return RunConfig.from_dict(data, source=source)


def _command_flags(command: str, source: str) -> dict:
    """The RunConfig flags given in a recorded command line (``--eval-every 0`` -> ``{"eval_every": "0"}``)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_config_arguments(parser, RunConfig)
    try:
        args, _ = parser.parse_known_args(shlex.split(command))
    except (argparse.ArgumentError, ValueError) as exc:
        raise UserError(f"{source}: cannot read the settings of its command {command!r}: {exc}") from None
    if args.config:
        raise UserError(f"{source}: its command read --config {args.config}, whose values the line does not "
                        "record; add them to the line as a \"config\" object")
    return given_flags(args, RunConfig)


def run_grid(base: RunConfig, variants: list[str], seeds: list[int], learning_rates: list[float],
             epochs: list[float], results_dir: Path, run_root: Path, *, command: str | None = None,
             skip_done: bool = True) -> list[dict]:
    """Run every (seed, variant, lr, epochs) combination; append each result as one JSON line."""
    from .train.config import narrowed
    from .trainers import task_family, trainer_for

    base = narrowed(base, RunConfig)  # a core TrainConfig: every system's options at their defaults
    if task_family(base.task) != "sentence":
        raise UserError(f"structattn sweep runs the sentence and token tasks; {base.task} is a reading task, whose "
                        "results lines carry test predictions: train each run with `structattn train` and record it "
                        "with experiments/record.py reading (see experiments/run_reading_experiments.sh)")
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
        cfg = replace(base, learning_rate=lr, epochs=ep, seed=seed, **opts)
        key = config_key(cfg)
        if key in done:
            print(f"skip (already in {out_file}): {name}", file=sys.stderr)
            continue
        # One folder per configuration: runs whose names agree (other max length, gate bias, ...) never
        # share a checkpoint.
        cfg = replace(cfg, output_dir=str(run_root / name / key))
        t0 = time.time()
        summary = trainer_for(cfg).train()
        summary.update(variant=variant, label=variant_label(result_fields(cfg)), wall_s=round(time.time() - t0, 1),
                       command=command, max_train_examples=cfg.max_train_examples, batch_size=cfg.batch_size,
                       max_length=cfg.max_length, group_by_length=cfg.group_by_length,
                       config=dataclasses.asdict(cfg), config_key=key,
                       finished_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        upsert_jsonl(out_file, summary, key=_line_key)
        summaries.append(summary)
        print(f"{name}: {summary['main_metric']}={summary['best']:.4f}", file=sys.stderr)
    return summaries


def _line_key(line: dict) -> str:
    """The config key of a results line, recomputed from its configuration (as `_done_keys` does)."""
    return config_key(record_config(line))


def _done_keys(path: Path) -> set[str]:
    """The config keys of the runs recorded in ``path`` (recomputed from each line's configuration)."""
    if not path.is_file():
        return set()
    keys = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            keys.add(config_key(record_config(json.loads(line), source=f"{path}:{n}")))
    return keys
