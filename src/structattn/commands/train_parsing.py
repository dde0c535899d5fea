"""``structattn train-parsing``: train one BNA chart parser configuration (flags or --config JSON).

Every `ParserConfig` field is a flag (``--d-model 256``, ``--layers bimsa,nsa``,
``--fine-tune-encoder false``) over ``--preset laptop`` (the default: the shipped bna-minilm's CPU settings) or
``--preset full`` (ParserConfig's own, larger defaults); ``--config FILE.json`` is read next and the flags given
override it. Rerunning with the same settings in the same ``--output-dir`` resumes; the summary JSON is printed at
the end.

Data: the fixed split of the NLTK WSJ sample (or ``--corpus NAME``, another corpus of the task registry's
``parsing`` family, `structattn.tasks.registry`), or ``--train FILE --dev FILE [--test FILE]``: any bracketed
treebank (one tree per line, or the PTB's multi-line layout), read and cleaned by the rules of
`structattn.tasks.ptb` with the same errors (``FILE:LINE: what is wrong; what to do``). Without ``--test``
there is no test parse.
"""
from __future__ import annotations

import argparse
import json

from ..config_io import add_dataclass_arguments, dataclass_from_args


#: ParserConfig fields whose flag is spelled as in the other commands (the field's own spelling is no flag): the
#: encoder is ``--model`` as in ``train``, example limits and clipping as in the others.
PARSER_FLAG_NAMES = {"encoder": "model", "max_train_trees": "max_train_examples",
                     "max_eval_trees": "max_eval_examples", "clip_grad": "clip_norm",
                     "attn_dropout": "attention_dropout", "variant": "mechanism"}


def add_parser_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset laptop|full``, ``--config FILE`` and one flag per ParserConfig field (all default to None = not
    given), named by `PARSER_FLAG_NAMES` where the field's own name differs from the command line's."""
    from ..bna.config import LOSSES, PARSER_PRESETS, POOLINGS, POS_MODES, SCORERS, VARIANTS, ParserConfig
    from ..train.config import PRECISIONS

    add_dataclass_arguments(parser, ParserConfig, PARSER_PRESETS, flag_names=PARSER_FLAG_NAMES,
                            descriptions={"encoder": "pretrained encoder: a Hugging Face name or folder; '' = the "
                                                     "offline all-MiniLM-L6-v2; 'none' = no pretrained encoder "
                                                     "(word embeddings + char BiLSTM)"},
                            choices={"variant": list(VARIANTS), "pos": POS_MODES, "pooling": POOLINGS, "loss": LOSSES,
                                     "scorer": SCORERS, "precision": PRECISIONS})


def parser_config_from_args(args: argparse.Namespace):
    """A ParserConfig: ``--preset``'s values (default laptop), then ``--config`` (if given), then every flag given."""
    from ..bna.config import PARSER_PRESETS, ParserConfig

    return dataclass_from_args(args, ParserConfig, PARSER_PRESETS)


def add_parser(sub) -> None:
    from ..tasks.registry import corpus_names

    p = sub.add_parser("train-parsing", aliases=["train-parser"],
                       help="train the BNA constituency parser on the treebank sample or your own treebank",
                       description="Train one chart parser configuration on the fixed split of the NLTK WSJ "
                                   "sample, or on your own files (--train, --dev, optional --test), keep the "
                                   "best dev model in OUTPUT_DIR/best, write dev.trees, test.trees and "
                                   "summary.json. Every ParserConfig field is a flag; --config reads a JSON file "
                                   "first. Rerunning in the same --output-dir resumes.")
    data = p.add_argument_group("own treebank (default: the NLTK WSJ sample's fixed split)")
    data.add_argument("--train", metavar="FILE", help="training trees: a bracketed treebank file (one tree per "
                                                      "line, or the PTB's multi-line layout); needs --dev")
    data.add_argument("--dev", metavar="FILE", help="dev trees (model selection, early stopping); needs --train")
    data.add_argument("--test", metavar="FILE", help="test trees, parsed and scored once at the end (optional)")
    corpora = corpus_names("parsing")
    data.add_argument("--corpus", choices=corpora, help=f"a registered treebank instead of own files (default "
                                                        f"{corpora[0]}, the NLTK WSJ sample's fixed split)")
    add_parser_config_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (one line per evaluation stays)")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="also write a resumable checkpoint every N updates (default 0: whenever 5 minutes passed)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..paths import check_output_folder
    from ..bna.trainer import TreebankFiles, train_parser

    data = TreebankFiles(train=args.train, dev=args.dev, test=args.test, corpus=args.corpus)
    config = parser_config_from_args(args)
    check_output_folder(config.output_dir)  # before any model or data loads
    summary = train_parser(config, show_progress=not args.no_progress, command=getattr(args, "argv", None),
                           data=data, checkpoint_every=args.checkpoint_every)
    print_summary(summary)
    return 0


def print_summary(summary: dict) -> None:
    """The main process prints the summary (without the history, which stays in summary.json); the others of a
    launch with several processes say where they stopped."""
    import sys

    if "process" in summary:
        print(f"process {summary['process']}: stopped at step {summary['steps']}, best step {summary['best_step']}, "
              f"best {summary['best']}", file=sys.stderr)
    else:
        print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))
