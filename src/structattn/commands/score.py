"""``structattn score``: score predictions against gold files with a task's standard scorer.

Examples::

    structattn score evalb ../shared/data/ptb_sample_nltk/treebank/combined/wsj_0001.mrg pred.trees
    structattn score evalb "../shared/data/ptb_sample_nltk/treebank/combined/wsj_01[6-9]?.mrg" test.trees --json
    structattn score evalb gold_folder/ test.trees --per-sentence

``score evalb`` is EVALB with COLLINS.prm (see :mod:`structattn.tasks.evalb` for the rules): GOLD is a tree
file, a folder (its ``*.mrg`` files in sorted order) or a quoted glob (matches in sorted order), the gold
files read one after another; PRED is one file with one tree per gold tree, in any whitespace layout. Gold
trees may be as found in the treebank (traces, function tags, outer bracket).
"""
from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

from ..errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("score", help="score predictions against gold files (evalb: constituency trees)",
                       description=__doc__.split("\n")[0])
    scorers = p.add_subparsers(dest="scorer", metavar="SCORER", required=True)
    _add_evalb(scorers)


def _add_evalb(scorers) -> None:
    e = scorers.add_parser("evalb", help="labelled bracketing recall/precision/F1 as EVALB with COLLINS.prm",
                           description="Labelled bracketing scores of PRED against GOLD, equal to "
                                       "`evalb -p COLLINS.prm` (punctuation and -NONE- deleted, TOP deleted, "
                                       "function tags stripped, ADVP = PRT), with the len<=40 breakdown.")
    e.add_argument("gold", metavar="GOLD", help="gold tree file, folder of *.mrg files, or quoted glob")
    e.add_argument("pred", metavar="PRED", help="predicted trees, one per gold tree, same order")
    e.add_argument("--json", action="store_true", help="print one JSON object instead of the EVALB summary")
    e.add_argument("--per-sentence", action="store_true", help="also print EVALB's per-sentence table")
    e.add_argument("--cutoff", type=int, default=40, help="length cut-off of the second block (default 40)")
    e.set_defaults(func=run_evalb)


def gold_paths(spec: str) -> list[Path]:
    """A file, a folder (its ``*.mrg`` sorted) or a glob (its matches sorted); UserError when nothing is found."""
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.mrg") if p.is_file())
        if not files:
            raise UserError(f"{path}: folder holds no *.mrg file; give a tree file, a folder of *.mrg or a glob")
        return files
    if path.is_file():
        return [path]
    if glob.has_magic(spec):
        files = sorted(Path(p) for p in glob.glob(spec) if Path(p).is_file())
        if not files:
            raise UserError(f"{spec}: the pattern matches no file")
        return files
    raise UserError(f"{spec}: file not found (GOLD is a tree file, a folder of *.mrg files or a quoted glob)")


def run_evalb(args) -> int:
    from ..tasks.evalb import MAX_ERROR, evalb_files

    if args.cutoff < 0:
        raise UserError(f"--cutoff must be >= 0, got {args.cutoff}")
    golds = gold_paths(args.gold)
    pred = Path(args.pred)
    result = evalb_files(golds, pred, cutoff=args.cutoff)
    # nothing dropped silently: every error/skip sentence is named on stderr, like evalb's "<line> : <error>"
    for sentence, message in result.errors:
        print(f"sentence {sentence}: {message}", file=sys.stderr)
    if result.errors:
        print(f"{result.error_sentences} error and {result.skipped_sentences} skip sentence(s) not scored "
              f"(of {result.sentences})", file=sys.stderr)
    if result.evalb_would_abort:
        print(f"note: the C program with COLLINS.prm (MAX_ERROR {MAX_ERROR}) would stop at the "
              f"{MAX_ERROR + 2}th error sentence without a summary", file=sys.stderr)
    if args.json:
        out = result.to_dict()
        out["gold"] = [str(p) for p in golds]
        out["pred"] = str(pred)
        print(json.dumps(out))
        return 0
    where = str(golds[0]) if len(golds) == 1 else f"{len(golds)} files, {golds[0]} .. {golds[-1]}"
    print(f"gold: {where}")
    print(f"pred: {pred}")
    if args.per_sentence:
        print("  Sent.                        Matched  Bracket   Cross        Correct Tag")
        print(" ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy")
        print("=" * 76)
        for sentence in result.per_sentence:
            print(sentence.table_line())
        print("=" * 76)
    print(result.summary())
    return 0
