"""``structattn sweep``: a grid of runs over seeds; every run appends a line to results/<task>.jsonl."""
from __future__ import annotations

import shlex
from pathlib import Path


def add_parser(sub) -> None:
    from ..run_config import RunConfig
    from ..train.config import add_config_arguments
    from .train import train_field_choices

    p = sub.add_parser("sweep", help="run variants x learning rates x epochs x seeds and record the results",
                       description="Fine-tune every combination of --variants, --learning-rates, --epoch-grid and "
                                   "--seeds over the settings the RunConfig flags give; each finished run appends "
                                   "one line to RESULTS_DIR/<task>.jsonl (runs already recorded are skipped), which "
                                   "`structattn report` reads.")
    add_config_arguments(p, RunConfig, train_field_choices())
    p.add_argument("--variants", nargs="+", default=["global", "wla:k=3", "sla:m=3"],
                   help="mechanism variants, NAME[:option=value,...] (default global wla:k=3 sla:m=3); e.g. "
                        "global wla:k=3 sla:m=3 sla:m=4 lisa:w=1.0")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="seeds of every variant (default 1 2 3)")
    p.add_argument("--learning-rates", nargs="+", type=float, default=None,
                   help="peak learning rates (default: --learning-rate's one value)")
    p.add_argument("--epoch-grid", nargs="+", type=float, default=None,
                   help="epoch counts (default: --epochs's one value)")
    p.add_argument("--results-dir", default="results", help="folder of the <task>.jsonl result files (default results)")
    p.add_argument("--run-root", default="runs", help="folder under which each run gets its output folder "
                                                      "(default runs)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..run_config import RunConfig
    from ..train.config import config_from_args
    from ..sweep import run_grid

    from ..paths import check_output_folder

    check_output_folder(args.run_root, "--run-root")
    check_output_folder(args.results_dir, "--results-dir")
    base = config_from_args(args, RunConfig)
    command = "structattn " + " ".join(shlex.quote(a) for a in args.argv)
    run_grid(base, args.variants, args.seeds, args.learning_rates or [base.learning_rate],
             args.epoch_grid or [base.epochs], Path(args.results_dir), Path(args.run_root), command=command)
    return 0
