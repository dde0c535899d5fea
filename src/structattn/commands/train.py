"""``structattn train``: fine-tune one configuration (flags or --config JSON)."""
from __future__ import annotations

import json
import sys


def train_field_choices() -> dict:
    """RunConfig field -> a function giving the names it accepts, from the registries (shown in each flag's help;
    the registries are imported only when the help is shown: the mechanisms' pulls in transformers)."""
    from ..train.config import PRECISIONS, task_names

    def registry(module: str, name: str, prefix: tuple = ()):
        def names() -> list[str]:
            import importlib

            return [*prefix, *getattr(importlib.import_module(f"structattn.{module}"), name)]
        return names

    return {"task": task_names, "mechanism": lambda: sorted(registry("attention.mechanisms", "MECHANISMS")()),
            "pool": registry("sgnet.names", "POOLS"), "long_inputs": registry("structure.align", "LONG_INPUTS"),
            "model_parts": registry("sgnet.names", "MODEL_PARTS"), "precision": PRECISIONS,
            "sgnet": registry("sweep", "SGNET_AGGREGATIONS", ("none",)), "sgnet_init": ("fresh", "copy")}


def add_parser(sub) -> None:
    from ..run_config import RunConfig
    from ..train.config import add_config_arguments

    p = sub.add_parser("train", help="fine-tune an encoder (with or without a structure mechanism) on a task",
                       description="Fine-tune one configuration. Every RunConfig field is a flag; --config "
                                   "reads a JSON file first. Rerunning in the same --output-dir resumes.")
    add_config_arguments(p, RunConfig, train_field_choices())
    p.add_argument("--no-progress", action="store_true", help="no progress bars (one line per evaluation stays)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..paths import check_output_folder
    from ..run_config import RunConfig
    from ..train.config import config_from_args
    from ..trainers import trainer_for

    cfg = config_from_args(args, RunConfig)
    check_output_folder(cfg.output_dir)  # before any model or data loads
    trainer = trainer_for(cfg, show_progress=not args.no_progress)
    summary = trainer.train()
    summary.pop("history", None)
    acc = trainer.engine.acc
    if acc.is_main_process:  # one summary per run, not one per process
        print(json.dumps(summary, indent=2))
    else:  # the others say where they stopped (all processes stop at the same step)
        print(f"process {acc.process_index} of {acc.num_processes}: stopped at step {summary['steps']}, "
              f"best step {summary['best_step']}, best {summary['best']}", file=sys.stderr)
    return 0
