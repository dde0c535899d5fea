"""``structattn score``: score predictions against gold files with a task's standard scorer.

Examples::

    structattn score evalb --gold ../shared/data/ptb_sample_nltk/treebank/combined/wsj_0001.mrg --predictions pred.trees
    structattn score evalb --gold "../shared/data/ptb_sample_nltk/treebank/combined/wsj_01[6-9]?.mrg" \
        --predictions test.trees --json
    structattn score evalb --gold gold_folder/ --predictions test.trees --per-sentence
    structattn score squad --gold ../shared/data/squad2/dev-v2.0.reconstructed-from-explorer.json \
        --predictions predictions.json --na-prob na_prob.json --output eval.json
    structattn score squad --task squad2 --split test --predictions results/squad2/RUN.json
    structattn score bleu --split test2016 --predictions results/nmt/RUN.test2016.de
    structattn score bleu --gold REF.de --predictions HYP.de
    structattn score race --predictions race_test.json                   # RACE test, middle + high
    structattn score race --task race_m --split dev --predictions dev.json
    structattn score mctest --task mctest500 --predictions results/mctest/RUN.json

Every scorer reads the reference side from ``--gold`` (or a registered split) and the scored output from
``--predictions``.

``score evalb`` is EVALB with COLLINS.prm (see [`structattn.tasks.evalb`][structattn.tasks.evalb] for the rules):
``--gold`` is a tree file, a folder (its ``*.mrg`` files in sorted order) or a quoted glob (matches in sorted order),
the gold files read one after another; ``--predictions`` is one file with one tree per gold tree, in any whitespace
layout, or ``-`` for standard input (``structattn parse ... | structattn score evalb --gold GOLD --predictions -``; the
gold side cannot be ``-``). Gold
trees may be as found in the treebank (traces, function tags, outer bracket).

``score squad`` is the official SQuAD ``evaluate-v2.0.py`` (see
[`structattn.tasks.squad_eval`][structattn.tasks.squad_eval]): ``--gold`` is a SQuAD 1.1 or 2.0 JSON file (or ``--task``
and ``--split`` name one), PRED (``--predictions``) maps every question id to its answer text (``""`` = no answer), NA
(optional) maps every id to a no-answer probability or score and adds the best-threshold sweep. It prints the JSON the
official script prints (same keys, same order, percentages); ``--output`` also writes it to a file. A question
without a prediction is an error (the official script crashes); predictions for ids not in the gold file are ignored, as
there, and counted on stderr.

``score race`` is accuracy as the RACE papers count it (Lai et al. 2017; see `structattn.tasks.race.score_race`):
PRED is a JSON object mapping every question id of the split (``middle1.txt:0``: passage id, question number
from 0) to the letter of the chosen option (``"A"`` .. ``"D"``); the score is correct / all questions of the split,
in percent, overall (RACE: middle and high pooled) and per level (``accuracy_middle`` = RACE-M, ``accuracy_high`` =
RACE-H). A question without a prediction counts as wrong (the denominator stays every question) and the count
is printed on stderr and kept as ``missing``; an id that is not a question of the split, or a value that is not
an option letter, is an error.

``score mctest`` is MCTest accuracy (Richardson et al. 2013): PRED maps every question id of the split
(``mc500.test.0:0``: story id, question number from 0) to an option letter; the score is correct / all questions,
in percent, overall and per question kind (``accuracy_one``: the answer is in one sentence of the story,
``accuracy_multiple``: it needs several). Every question needs a prediction; a missing one, an id that is not a
question of the split, or a value that is not an option letter is an error.

``score bleu`` is sacreBLEU's corpus BLEU (detokenised, case-sensitive, 13a; see
[`structattn.tasks.bleu`][structattn.tasks.bleu]) of a hypothesis file (one line per reference line) against a Multi30k
split's German references or a reference file; it prints the score and sacreBLEU's signature (``--json``: one JSON
object).
"""
from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

from ..errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("score", help="score predictions against gold files (evalb: constituency trees; "
                                     "squad: span QA; race, mctest: multiple choice; bleu: translation)",
                       description=__doc__.split("\n")[0])
    scorers = p.add_subparsers(dest="scorer", metavar="SCORER", required=True)
    _add_evalb(scorers)
    _add_squad(scorers)
    _add_bleu(scorers)
    for name in OPTION_SCORERS:
        _add_option_scorer(scorers, name)


#: the multiple-choice scorers: name -> (help, description, an example question id, the tasks and their help)
OPTION_SCORERS = {
    "race": ("RACE accuracy (overall, RACE-M, RACE-H) of predicted option letters",
             "Accuracy of PRED on a RACE split as the RACE papers count it: correct / all questions, overall and per "
             "level, in percent. A question without a prediction counts as wrong (counted on stderr); an unknown id "
             "or a value that is not an option letter is an error.",
             "middle1.txt:0", ("race", "race_m", "race_h"),
             "race = both levels (default), race_m = middle only, race_h = high only"),
    "mctest": ("MCTest accuracy (overall, one / multiple) of predicted option letters",
               "Accuracy of PRED on an MCTest split: correct / all questions, overall and per question kind, in "
               "percent. Every question needs a prediction; an unknown id or a value that is not an option letter "
               "is an error.",
               "mc500.test.0:0", ("mctest500", "mctest160"), "mctest500 = MC500 (default), mctest160 = MC160"),
}


def _add_option_scorer(scorers, name: str) -> None:
    """``score race`` / ``score mctest``: accuracy of predicted option letters (`OPTION_SCORERS`)."""
    help_text, description, example_id, tasks, task_help = OPTION_SCORERS[name]
    p = scorers.add_parser(name, help=help_text, description=description)
    p.add_argument("--predictions", required=True, metavar="PRED.json",
                   help=f'JSON object: question id (e.g. "{example_id}") -> option letter "A".."D" '
                        "(what `structattn predict --output PRED.json` writes)")
    p.add_argument("--split", default="test", help="train | dev | test (default test)")
    p.add_argument("--task", default=tasks[0], choices=tasks, help=task_help)
    p.add_argument("--output", metavar="eval.json", help="also write the JSON to this file (default: none)")
    p.set_defaults(func=run_race if name == "race" else run_mctest)


def run_race(args) -> int:
    from ..tasks.race import score_race

    questions, predictions = _option_predictions(args)
    source = f"{args.task}/{args.split}"
    result = score_race(questions, predictions, source)
    _note_missing([q.qid for q in questions if q.qid not in predictions], source)
    return _report(result, args.output)


def run_mctest(args) -> int:
    from ..tasks.multiple_choice import score_option_letters

    questions, predictions = _option_predictions(args)
    return _report(score_option_letters(args.task, questions, predictions, args.split), args.output)


def _option_predictions(args) -> tuple[list, dict]:
    """The questions of ``--task``'s ``--split`` and the ``--predictions`` file's option letters (paths checked)."""
    from ..tasks.multiple_choice import get_mc_task

    _check_files(args, predictions="--predictions", output="--output")
    return get_mc_task(args.task).read(args.split), _json_object(args.predictions, "option letter")


def _require_one(args, command: str, **flags: str) -> None:
    """Exactly one of ``flags`` (attribute -> flag) given, else one line naming the scorer and the flags."""
    given = [flag for attribute, flag in flags.items() if getattr(args, attribute, None) is not None]
    if len(given) != 1:
        names = " or ".join(flags.values())
        raise UserError(f"{command} needs {names}" if not given else f"{command}: give only one of {names}")


def _check_files(args, output: str | None = None, **inputs: str) -> None:
    """Every input file (attribute -> flag) readable and the output file writable, before anything is read."""
    from ..paths import check_input_file, check_output_file

    for attribute, flag in inputs.items():
        check_input_file(getattr(args, attribute), flag)
    if output:
        check_output_file(args.output, output)


def _report(result: dict, out: str | None) -> int:
    """Print ``result`` as JSON (and write it to ``out`` when given); the command's exit code."""
    from ..io import atomic_write_text

    if out:
        atomic_write_text(Path(out), json.dumps(result) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def _add_bleu(scorers) -> None:
    b = scorers.add_parser("bleu", help="sacreBLEU corpus BLEU of a translation file",
                           description="Detokenised, case-sensitive sacreBLEU (13a) of the --predictions file against "
                                       "a Multi30k split's references (--split) or a reference file (--gold).")
    ref = b.add_mutually_exclusive_group()
    ref.add_argument("--split", help="Multi30k split whose German side is the reference (test2016, test2017, "
                                     "test2018, mscoco2017, dev)")
    ref.add_argument("--gold", metavar="REF", help="reference file, one line per predicted line")
    b.add_argument("--predictions", metavar="HYP", help="the translations scored (UTF-8, one line per reference "
                                                        "line; required)")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(func=run_bleu)


def run_bleu(args) -> int:
    from ..tasks.base import read_lines
    from ..tasks.bleu import corpus_bleu
    from ..tasks.multi30k import read_split

    from ..io import read_input_lines

    _require_one(args, "score bleu", split="--split", gold="--gold")
    _require_one(args, "score bleu", predictions="--predictions")
    _check_files(args, gold="--gold", predictions="--predictions")
    refs = read_split(args.split).targets if args.split else read_lines(Path(args.gold))
    _, hyps = read_input_lines(args.predictions)  # bad bytes and control characters: FILE:LINE
    scored = corpus_bleu(hyps, refs)
    if args.json:
        print(json.dumps({"bleu": round(scored["bleu"], 2), "signature": scored["signature"]}))
    else:
        print(f"{scored['details']}  [{scored['signature']}]")
    return 0


def _add_evalb(scorers) -> None:
    e = scorers.add_parser("evalb", help="labelled bracketing recall/precision/F1 as EVALB with COLLINS.prm",
                           description="Labelled bracketing scores of --predictions against --gold, equal to "
                                       "`evalb -p COLLINS.prm` (punctuation and -NONE- deleted, TOP deleted, "
                                       "function tags stripped, ADVP = PRT), with the len<=40 breakdown.")
    e.add_argument("--gold", metavar="GOLD", help="gold tree file, folder of *.mrg files, or quoted glob (required)")
    e.add_argument("--predictions", metavar="PRED",
                   help="predicted trees, one per gold tree, same order; - = standard input (required)")
    e.add_argument("--json", action="store_true", help="print one JSON object instead of the EVALB summary")
    e.add_argument("--per-sentence", action="store_true", help="also print EVALB's per-sentence table")
    e.add_argument("--per-label", action="store_true",
                   help="also print recall, precision and F1 of each constituent label (JSON: a \"labels\" list)")
    e.add_argument("--cutoff", type=int, default=40, help="length cut-off of the second block (default 40)")
    e.set_defaults(func=run_evalb)


def _add_squad(scorers) -> None:
    q = scorers.add_parser("squad", help="exact match and F1 as the official SQuAD evaluate-v2.0.py",
                           description="EM/F1 of --predictions against --gold with the rules of the official SQuAD "
                                       "evaluate-v2.0.py (also for SQuAD 1.1 files), printed as its JSON.")
    gold = q.add_mutually_exclusive_group()
    gold.add_argument("--gold", metavar="DATA.json", help="SQuAD JSON file (1.1 or 2.0)")
    gold.add_argument("--task", choices=("squad2", "squad11"),
                      help="score against a split of a registered task instead (with --split): e.g. the test part "
                           "of the SQuAD 2.0 article split (structattn/tasks/squad2_split.json)")
    q.add_argument("--split", default="test", help="with --task: train | dev | test (default test)")
    q.add_argument("--predictions", required=True, metavar="PRED.json",
                   help='JSON object: question id -> answer text ("" = no answer)')
    q.add_argument("--na-prob", metavar="NA.json",
                   help="JSON object: question id -> no-answer probability; adds best_exact/best_f1 and thresholds")
    q.add_argument("--na-prob-thresh", type=float, default=1.0,
                   help="predict no answer where na_prob exceeds this (default 1.0)")
    q.add_argument("--output", metavar="eval.json", help="also write the JSON to this file (default: none)")
    q.set_defaults(func=run_squad)


def _json_object(path: str, what: str) -> dict:
    """A JSON file holding an object (``what`` names it in errors)."""
    from ..config_io import read_json

    p = Path(path)
    value = read_json(p, f"{what} file")
    if not isinstance(value, dict):
        raise UserError(f"{p}: expected a JSON object mapping question id -> {what}, got {type(value).__name__}")
    return value


def _note_missing(missing: list[str], source: str) -> None:
    """On stderr: how many questions of ``source`` have no prediction (they count as wrong), and the first ids."""
    if missing:
        shown = ", ".join(repr(q) for q in missing[:5]) + (", ..." if len(missing) > 5 else "")
        print(f"note: {len(missing)} question(s) of {source} have no prediction and count as wrong (first: {shown})",
              file=sys.stderr)


def run_squad(args) -> int:
    from ..tasks.squad import load_squad
    from ..tasks.squad_eval import evaluate, has_answer, missing_predictions

    _require_one(args, "score squad", gold="--gold", task="--task")
    _check_files(args, gold="--gold", predictions="--predictions", na_prob="--na-prob", output="--output")
    if args.task:
        from ..tasks.squad import get_qa_task

        dataset = get_qa_task(args.task).read(args.split).dataset
        source = f"{args.task}/{args.split}"
    else:
        dataset, source = load_squad(args.gold), args.gold
    predictions = _json_object(args.predictions, "answer text")
    na_probs = _json_object(args.na_prob, "no-answer probability") if args.na_prob else None
    result = evaluate(dataset, predictions, na_probs, args.na_prob_thresh)
    # the official script prints "Missing prediction for <id>" per question; we count them as wrong
    _note_missing(missing_predictions(dataset, predictions), source)
    extra = len(set(predictions) - set(has_answer(dataset)))
    if extra:  # ignored as by the official script, but never silently
        print(f"note: {extra} prediction(s) for question ids not in {source} were ignored", file=sys.stderr)
    return _report(result, args.output)


def gold_paths(spec: str) -> list[Path]:
    """A file, a folder (its ``*.mrg`` sorted) or a glob (its matches sorted); UserError when nothing is found
    and for ``-`` (only the predictions may come from standard input)."""
    if spec == "-":
        raise UserError("--gold cannot be standard input ('-'): give the gold tree file, folder of *.mrg or quoted "
                        "glob; the predicted trees (--predictions) may be '-' to read them from standard input")
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
    raise UserError(f"{spec}: file not found (--gold is a tree file, a folder of *.mrg files or a quoted glob)")


def run_evalb(args) -> int:
    from ..io import STDIN
    from ..tasks.evalb import MAX_ERROR, evalb_files

    if args.cutoff < 0:
        raise UserError(f"--cutoff must be >= 0, got {args.cutoff}")
    _require_one(args, "score evalb", gold="--gold")
    _require_one(args, "score evalb", predictions="--predictions")
    _check_files(args, predictions="--predictions")
    golds = gold_paths(args.gold)
    pred = STDIN if args.predictions == "-" else Path(args.predictions)
    result = evalb_files(golds, args.predictions, cutoff=args.cutoff)
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
        if args.per_label:
            out["labels"] = [score.to_dict() for score in result.label_scores()]
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
    if args.per_label:
        print("", *label_table(result.label_scores()), sep="\n")
    return 0


def label_table(scores) -> list[str]:
    """The ``--per-label`` block: one line per label (`structattn.tasks.evalb.LabelScore`), most frequent first."""
    lines = ["=== Per label ===", "", "label       gold   test  match  Recall   Prec.  FMeasure"]
    for score in scores:
        lines.append(f"{score.label:<10} {score.gold_brackets:5d}  {score.test_brackets:5d}  {score.matched:5d}  "
                     f"{score.recall:6.2f}  {score.precision:6.2f}    {score.f1:6.2f}")
    return lines
