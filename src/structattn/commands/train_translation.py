"""``structattn train-translation``: train one translation run (Multi30k En->De by default; flags or --config JSON).

Every :class:`~structattn.train.translation.NMTConfig` field is a flag (``--variant hybrid_gate``,
``--seed 2``, ``--k 2``) over ``--preset laptop`` (the default: 800 updates) or ``--preset full`` (NMTConfig's own
defaults, 8,000 updates); ``--config FILE.json`` is read next and the flags given override it. Rerunning with the
same settings in the same ``--output-dir`` resumes; the summary JSON is printed at the end.
"""
from __future__ import annotations


def add_parser(sub) -> None:
    from ..config_io import add_dataclass_arguments
    from ..models.translation import VARIANTS
    from ..train.translation import NMT_PRESETS, NMTConfig

    p = sub.add_parser("train-translation", aliases=["train-nmt"],
                       help="train a translation model with structure-aware encoder attention",
                       description="Train one encoder-decoder run (variants: " + ", ".join(VARIANTS) + "), keep "
                                   "the best dev-BLEU model, pick the final model (best or checkpoint average), "
                                   "translate the test sets into OUTPUT_DIR/hypotheses and write summary.json. "
                                   "Rerunning in the same --output-dir resumes.")
    add_dataclass_arguments(p, NMTConfig, NMT_PRESETS)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (one line per evaluation stays)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..config_io import dataclass_from_args
    from ..train.translation import NMT_PRESETS, NMTConfig, train_translation

    config = dataclass_from_args(args, NMTConfig, NMT_PRESETS)
    from .train_parsing import print_summary

    print_summary(train_translation(config, show_progress=not args.no_progress, command=getattr(args, "argv", None)))
    return 0
