"""``structattn train-translation``: train one translation run (Multi30k En->De by default; flags or --config JSON).

``--corpus NAME`` picks another corpus of the task registry's ``translation`` family
([`structattn.tasks.registry`][structattn.tasks.registry]); ``--train-source`` and the other file flags train on
your own parallel text instead.

Every `NMTConfig` field is a flag (``--mechanism hybrid_gate``,
``--seed 2``, ``--k 2``) over ``--preset laptop`` (the default: 800 updates) or ``--preset full`` (NMTConfig's own
defaults, 8,000 updates); ``--config FILE.json`` is read next and the flags given override it. Rerunning with the
same settings in the same ``--output-dir`` resumes; the summary JSON is printed at the end.
"""
from __future__ import annotations


#: What each NMTConfig field means, for the fields whose line in the class has no comment (or too short a one).
NMT_FIELD_HELP = {
    "output_dir": "folder of the run: checkpoint/, best/, final/, hypotheses/, summary.json; rerunning resumes",
    "variant": "encoder attention: the stock Transformer or a structure-aware variant",
    "size": "model size (micro is for tests and smoke runs)",
    "seed": "seeds torch, numpy and random",
    "train_source": "own parallel text instead of Multi30k: the training source file (one sentence per line; "
                    "needs --train-target, --dev-source and --dev-target)",
    "train_target": "own parallel text: the training target file, line by line parallel to --train-source",
    "dev_source": "own parallel text: the dev source file (model selection by dev BLEU)",
    "dev_target": "own parallel text: the dev target file",
    "test_source": "own parallel text: a test source file (optional)",
    "test_target": "own parallel text: the test target file",
    "test_splits": "the corpus's test sets translated and scored at the end",
    "max_train_examples": "use only the first N training pairs; 0 = all",
    "vocab_size": "size of the joint BPE vocabulary",
    "max_tokens": "padded tokens per training batch (source and target)",
    "warmup": "linear warm-up, in updates, to the peak learning rate (then --lr-decay)",
    "lr_decay": "the learning rate after the warm-up: inverse_sqrt (sqrt(warmup / step)) or linear (down to 0 at "
                "the last update)",
    "max_updates": "optimizer updates of the run",
    "label_smoothing": "label smoothing of the cross-entropy",
    "eval_every": "updates between dev-BLEU evaluations",
    "eval_beam": "beam size of the dev-BLEU evaluations (1 = greedy)",
    "patience": "evaluations without dev-BLEU improvement before stopping; 0 = never stop early",
    "average_last": "the final model may average the last N checkpoints (kept when it beats best/ on dev)",
    "beam": "beam size of the final test translations",
    "length_penalty": "exponent of the length normalisation of beam scores",
}


def add_parser(sub) -> None:
    from ..config_io import add_dataclass_arguments
    from ..translation.config import BATCHINGS, LR_DECAY_NAMES, NMT_PRESETS, NMTConfig
    from ..translation.model import INITIALISATIONS, RESIDUALS, SIZES, VARIANTS
    from ..tasks.registry import corpus, corpus_names
    from ..train.config import PRECISIONS

    corpora = corpus_names("translation")
    test_splits = list(dict.fromkeys(s for name in corpora for s in corpus("translation", name).test_splits))
    p = sub.add_parser("train-translation", aliases=["train-nmt"],
                       help="train a translation model with structure-aware encoder attention",
                       description="Train one encoder-decoder run (variants: " + ", ".join(VARIANTS) + "), keep "
                                   "the best dev-BLEU model, pick the final model (best or checkpoint average), "
                                   "translate the test sets into OUTPUT_DIR/hypotheses and write summary.json. "
                                   "Rerunning in the same --output-dir resumes.")
    add_dataclass_arguments(p, NMTConfig, NMT_PRESETS, flag_names={"warmup": "warmup_steps", "max_updates": "max_steps",
                                                               "variant": "mechanism"},
                            descriptions=NMT_FIELD_HELP,
                            choices={"variant": list(VARIANTS), "size": list(SIZES), "gate": ("token", "head", "none"),
                                     "precision": PRECISIONS, "test_splits": test_splits, "init": list(INITIALISATIONS),
                                     "residual": RESIDUALS, "batching": BATCHINGS,
                                     "lr_decay": LR_DECAY_NAMES})
    p.add_argument("--corpus", choices=corpora, default=corpora[0],
                   help=f"the registered corpus trained on when no own files are given (default {corpora[0]})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (one line per evaluation stays)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..config_io import dataclass_from_args
    from ..paths import check_input_file, check_output_folder
    from ..translation.config import NMT_PRESETS, NMTConfig

    config = dataclass_from_args(args, NMTConfig, NMT_PRESETS)
    check_output_folder(config.output_dir)  # before any model or data loads
    for field in ("train_source", "train_target", "dev_source", "dev_target", "test_source", "test_target"):
        check_input_file(getattr(config, field), "--" + field.replace("_", "-"))
    from ..translation.trainer import train_translation
    from .train_parsing import print_summary

    print_summary(train_translation(config, show_progress=not args.no_progress, command=getattr(args, "argv", None),
                                    corpus=args.corpus))
    return 0
