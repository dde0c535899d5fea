"""``structattn train-parser``: train one BNA chart parser configuration (flags or --config JSON).

Every :class:`~structattn.chart_parser.ParserConfig` field is a flag (``--d-model 256``, ``--layers bimsa,nsa``,
``--fine-tune-encoder false``); ``--config FILE.json`` is read first and the flags given override it. Rerunning
with the same settings in the same ``--output-dir`` resumes; the summary JSON is printed at the end.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, get_type_hints


def add_parser_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` plus one ``--<field>`` flag per ParserConfig field (all default to None = not given)."""
    from ..chart_parser import ParserConfig

    parser.add_argument("--config", help="JSON file with ParserConfig keys; flags override it")
    hints = get_type_hints(ParserConfig)
    for f in dataclasses.fields(ParserConfig):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else None
        hint = hints[f.name]
        kind = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")  # int, list[str] | None
        extra = "; comma-separated" if "list" in kind else ""
        parser.add_argument(flag, dest=f.name, default=None, metavar=f.name.upper(),
                            help=f"{kind} (default {default!r}{extra})")


def given_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The ParserConfig fields given as flags, uncoerced. ``none`` means null only for fields that may be
    null (``--encoder none`` stays the string, the no-pretraining encoder)."""
    from ..chart_parser import ParserConfig

    hints = get_type_hints(ParserConfig)
    out = {}
    for f in dataclasses.fields(ParserConfig):
        value = getattr(args, f.name, None)
        if value is None:
            continue
        nullable = "None" in str(hints[f.name])
        out[f.name] = None if nullable and value.lower() in ("none", "null") else value
    return out


def parser_config_from_args(args: argparse.Namespace):
    """A ParserConfig from ``--config`` (if given) with every flag that was given applied on top."""
    from ..chart_parser import ParserConfig

    base = ParserConfig.load(args.config) if getattr(args, "config", None) else ParserConfig()
    data = dataclasses.asdict(base) | given_flags(args)
    return ParserConfig.from_dict(data, source="command line")


def add_parser(sub) -> None:
    p = sub.add_parser("train-parser", help="train the BNA constituency parser on the treebank sample",
                       description="Train one chart parser configuration on the fixed treebank split, keep the "
                                   "best dev model in OUTPUT_DIR/best, write test.trees, dev.trees and "
                                   "summary.json. Every ParserConfig field is a flag; --config reads a JSON file "
                                   "first. Rerunning in the same --output-dir resumes.")
    add_parser_config_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..train.chart_training import train_parser

    config = parser_config_from_args(args)
    summary = train_parser(config, show_progress=not args.no_progress, command=getattr(args, "argv", None))
    summary = {k: v for k, v in summary.items() if k != "history"}  # the history stays in summary.json
    print(json.dumps(summary, indent=2))
    return 0
