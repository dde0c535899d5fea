"""``structattn predict``: predictions of a saved model.

Sentence and token tasks: JSON lines (labels mapped back to words). Span QA (``--task squad2`` / ``squad11``):
the files users of SQuAD expect — ``--output PRED.json`` {qid: answer text, "" for no answer}, and beside it
``PRED.na_prob.json`` {qid: σ(null score − best span score)} (the official scorer's ``--na-prob-file``) and
``PRED.nbest.json`` {qid: the n best answers with their logits and probabilities}; the no-answer threshold is
the one saved with the model, except on a task whose questions are all answerable (``--task squad11``: never
"no answer"), and ``--na-threshold`` overrides both. Multiple choice: ``--output PRED.json`` {qid: option letter
"A".."D"} (what ``structattn score race`` and ``score mctest`` read), with ``PRED.scores.json`` {qid: the options'
scores} beside it; any other ``--output`` (or stdout): JSON lines {qid, prediction (option index), scores}.

    structattn predict --model runs/squad/best --task squad2 --split test --output test_pred.json
    structattn predict --model runs/squad/best --input my_questions.json --output pred.json   # any SQuAD-format file

Every path is checked before the model loads.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import UserError


def add_parser(sub) -> None:
    from ..cli_grammar import require_in_usage
    from .evaluate import add_model_folder_option

    p = sub.add_parser("predict", help="predict a split (or a file of questions) with a saved model",
                       description="Predictions of a model folder saved by `structattn train` on a split of its "
                                   "task (or a SQuAD-format --input file), in the file formats the task's scorers "
                                   "read (`structattn score`).")
    add_model_folder_option(p)
    p.add_argument("--task", default=None, help="task to predict (default: the task the model was trained on)")
    p.add_argument("--split", default="test", help="split to predict: train | dev | test (default test)")
    p.add_argument("--input", default=None, metavar="FILE",
                   help="span QA: a SQuAD-format JSON file to answer instead of a split")
    p.add_argument("--limit", type=int, default=0, help="predict only the first N examples (default 0 = all)")
    p.add_argument("--na-threshold", default=None, metavar="T",
                   help="span QA: answer '' when the null score exceeds the best span's by more than T; 'never' "
                        "always answers (default: the threshold saved with the model, or 'never' for a task "
                        "without unanswerable questions such as squad11)")
    p.add_argument("--output", default="-", help="JSON lines file (default stdout); span QA: the predictions "
                                                 "JSON (required), with .na_prob.json and .nbest.json beside it; "
                                                 "multiple choice: a .json file gets {qid: option letter}, with "
                                                 ".scores.json beside it")
    require_in_usage(p, "--model")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..paths import check_input_file, check_output_file
    from ..trainers import load_trained, task_family
    from .evaluate import model_folder

    folder = model_folder(args)
    check_output_file(args.output, "--output")
    check_input_file(args.input, "--input")
    trainer = load_trained(folder, args.task)
    family = task_family(trainer.cfg.task)
    if args.input is not None and family != "span_qa":
        raise UserError("--input takes a SQuAD-format file and works for span-QA models (--task squad2/squad11); "
                        "for other tasks predict a --split")
    return PREDICTORS[family](trainer, args)


def _open(output: str):
    return sys.stdout if output == "-" else open(output, "w", encoding="utf-8")


def _predict_sentences(trainer, args) -> int:
    from ..train.features import aggregate_predictions

    examples, feats = trainer.features(args.split, args.limit)
    logits = trainer.predict(feats)
    preds = aggregate_predictions(trainer.task, feats, logits, examples, trainer.label_list)
    out = _open(args.output)
    try:
        for ex, pred in zip(examples, preds):
            label = pred
            if trainer.task.kind == "classification" and trainer.label_list:
                label = trainer.label_list[pred]
            rec = {"guid": ex.guid, "words": ex.words_a, "prediction": label}
            if ex.words_b is not None:
                rec["words_b"] = ex.words_b
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def side_files(output: Path) -> tuple[Path, Path]:
    """The na-prob and n-best files written beside a predictions file ``X.json``: ``X.na_prob.json``, ``X.nbest.json``."""
    stem = output.name[:-5] if output.name.endswith(".json") else output.name
    return output.with_name(stem + ".na_prob.json"), output.with_name(stem + ".nbest.json")


def _predict_span_qa(trainer, args) -> int:
    from ..sgnet.span_qa import na_probabilities
    from ..tasks.squad import load_squad, read_squad
    from ..io import atomic_write_json

    if args.output == "-":
        raise UserError("span QA writes three files: give --output PRED.json (PRED.na_prob.json and "
                        "PRED.nbest.json are written beside it)")
    threshold = _na_threshold(args, trainer)
    if args.input is not None:
        dataset = load_squad(args.input)
        data, feats = trainer.features_of(read_squad(dataset), dataset, args.limit, source=str(args.input))
    else:
        data, feats = trainer.features(args.split, args.limit)
    preds, na_scores, nbest, _ = trainer.answers(data, feats, threshold=threshold)
    output = Path(args.output)
    na_file, nbest_file = side_files(output)
    atomic_write_json(output, preds)
    atomic_write_json(na_file, na_probabilities(na_scores))
    atomic_write_json(nbest_file, nbest)
    empty = sum(1 for text in preds.values() if text == "")
    print(f"{len(preds):,} questions of {data.source} ({empty:,} answered with no answer at threshold "
          f"{threshold:g}): wrote {output}, {na_file.name} and {nbest_file.name}", file=sys.stderr)
    return 0


def _na_threshold(args, trainer) -> float:
    """The no-answer threshold of a span-QA prediction: ``--na-threshold``, else the model's on this task
    (`answering_threshold`, set by ``load_trained``)."""
    if args.na_threshold is not None:
        return parse_na_threshold(args.na_threshold)
    if not trainer.task.no_answer:
        print(f"{trainer.task.name} has no unanswerable questions: every question gets an answer (the saved "
              "threshold is not used; --na-threshold sets one)", file=sys.stderr)
    return trainer.fixed_threshold


def parse_na_threshold(text: str) -> float:
    """``--na-threshold``'s value: a number, or ``never`` (+inf: always answer)."""
    import math

    if text == "never":
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"--na-threshold takes a number or 'never', not {text!r}") from None
    if math.isnan(value):
        raise UserError("--na-threshold takes a number or 'never', not nan")
    return value


def option_letter(index: int) -> str:
    """``0`` -> ``"A"``: how RACE's files and scorers name an option."""
    return chr(ord("A") + index)


def option_scores_file(letters_file: Path) -> Path:
    """``X.json`` -> ``X.scores.json``: where the options' scores sit beside an option-letter file."""
    return letters_file.with_name(letters_file.name.removesuffix(".json") + ".scores.json")


def write_option_letters(questions, scores, output: Path) -> Path:
    """``output`` = {qid: letter of the best-scored option}; returns the ``.scores.json`` written beside it
    ({qid: every option's score, rounded to 6 decimals})."""
    from ..io import atomic_write_json

    scores_file = option_scores_file(output)
    atomic_write_json(output, {q.qid: option_letter(int(row.argmax())) for q, row in zip(questions, scores)})
    atomic_write_json(scores_file, {q.qid: [round(float(x), 6) for x in row] for q, row in zip(questions, scores)})
    return scores_file


def _predict_multiple_choice(trainer, args) -> int:
    examples, feats = trainer.features(args.split, args.limit)
    scores = trainer.predict(feats)
    if args.output.endswith(".json"):
        scores_file = write_option_letters(examples.questions, scores, Path(args.output))
        print(f"{len(examples.questions):,} questions -> {args.output} (option letters) and {scores_file}",
              file=sys.stderr)
        return 0
    out = _open(args.output)
    try:
        for q, row in zip(examples.questions, scores):
            out.write(json.dumps({"qid": q.qid, "prediction": int(row.argmax()),
                                  "scores": [round(float(x), 6) for x in row]}) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


#: family (`structattn.tasks.registry.FAMILIES`) -> how its predictions are written
PREDICTORS = {"sentence": _predict_sentences, "span_qa": _predict_span_qa, "multiple_choice": _predict_multiple_choice}
