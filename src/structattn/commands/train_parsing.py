"""``structattn train-parsing``: train one BNA chart parser configuration (flags or --config JSON).

Every :class:`~structattn.models.parser.ParserConfig` field is a flag (``--d-model 256``, ``--layers bimsa,nsa``,
``--fine-tune-encoder false``); ``--config FILE.json`` is read first and the flags given override it. Rerunning
with the same settings in the same ``--output-dir`` resumes; the summary JSON is printed at the end.
"""
from __future__ import annotations

import argparse
import json

from ..config_io import add_dataclass_arguments, dataclass_from_args


def add_parser_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` plus one ``--<field>`` flag per ParserConfig field (all default to None = not given)."""
    from ..models.parser import ParserConfig

    add_dataclass_arguments(parser, ParserConfig)


def parser_config_from_args(args: argparse.Namespace):
    """A ParserConfig from ``--config`` (if given) with every flag that was given applied on top."""
    from ..models.parser import ParserConfig

    return dataclass_from_args(args, ParserConfig)


def add_parser(sub) -> None:
    p = sub.add_parser("train-parsing", aliases=["train-parser"],
                       help="train the BNA constituency parser on the treebank sample",
                       description="Train one chart parser configuration on the fixed treebank split, keep the "
                                   "best dev model in OUTPUT_DIR/best, write test.trees, dev.trees and "
                                   "summary.json. Every ParserConfig field is a flag; --config reads a JSON file "
                                   "first. Rerunning in the same --output-dir resumes.")
    add_parser_config_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..train.parsing import train_parser

    config = parser_config_from_args(args)
    summary = train_parser(config, show_progress=not args.no_progress, command=getattr(args, "argv", None))
    summary = {k: v for k, v in summary.items() if k != "history"}  # the history stays in summary.json
    print(json.dumps(summary, indent=2))
    return 0
