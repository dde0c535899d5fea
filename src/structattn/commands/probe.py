"""``structattn probe --model DIR``: probing tasks (from UD English EWT) on a trained translation encoder.

Builds the tasks of `structattn.tasks.probing` (SeLn, WC, TrDep, ToCo, BShif, Tense, SubjNum, ObjNum,
CoIn), encodes their sentences with the frozen encoder (mean of the last layer) and trains the MLP probe of
`structattn.translation.probing` per task. ``--untrained`` probes the same architecture with fresh random
weights instead (the control row of Conneau et al. 2018). Prints one line per task and writes the JSON
(``--output``).
"""
from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    from . import trained_model
    from ..tasks.probing import TASKS

    p = sub.add_parser("probe", help="probing tasks on a trained translation encoder",
                       description="Accuracy of an MLP probe on the mean encoder vector, per probing task built "
                                   "from UD English EWT (tasks: " + ", ".join(TASKS) + ").")
    p.add_argument("--model", required=True, type=trained_model("translator"), metavar="NAME|DIR",
                   help="translation model's name or folder (final/ of a train-translation run)")
    p.add_argument("--tasks", nargs="+", default=list(TASKS), help="tasks to run (default: all): " + ", ".join(TASKS))
    p.add_argument("--seed", type=int, default=42, help="probe initialisation and data-construction seed (default 42)")
    p.add_argument("--untrained", action="store_true",
                   help="probe the model's architecture with fresh random weights (seeded by --seed) instead of "
                        "its trained ones: the untrained-encoder control")
    p.add_argument("--output", default=None, help="also write the results JSON to this file (default: none); its "
                                                  "folder must exist")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..tasks.probing import TASKS, build_task, read_ud
    from ..io import atomic_write_json
    from ..translation.probing import probe_model
    from ..translation.translator import Translator
    from ..errors import UserError
    from ..paths import check_output_file

    unknown = [t for t in args.tasks if t not in TASKS]
    if unknown:
        raise UserError(f"unknown probing task(s) {', '.join(unknown)}; valid: {', '.join(TASKS)}")
    check_output_file(args.output, "--output")
    translator = Translator.load(args.model)
    if args.untrained:
        from ..translation.model import untrained_like

        translator = Translator(untrained_like(translator.model, args.seed), translator.tokenizer,
                                translator.parser_name)
    splits = {s: read_ud(s) for s in ("train", "dev", "test")}
    tasks = [build_task(name, splits, seed=args.seed) for name in args.tasks]

    def report(name, result):
        print(f"{name}: test {result['test_accuracy']:.1f} (dev {result['dev_accuracy']:.1f}, majority "
              f"{result['majority_test_accuracy']:.1f}, {result['classes']} classes, sizes {result['sizes']})",
              file=sys.stderr)

    results = probe_model(translator, tasks, seed=args.seed, progress=report)
    out = {"model": args.model, "untrained": args.untrained, "seed": args.seed, "tasks": results,
           "dropped": {t.name: t.dropped for t in tasks}}
    if args.output:
        atomic_write_json(args.output, out)
    print(json.dumps({k: round(v["test_accuracy"], 1) for k, v in results.items()}))
    return 0
