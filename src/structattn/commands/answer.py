"""``structattn answer``: a trained reader answers questions about passages
([`structattn.sgnet.reader.Reader`][structattn.sgnet.reader.Reader]).

Where the questions come from (one source per call):

- flags: ``--question Q`` with ``--context TEXT`` or ``--context-file FILE`` (the passage as plain UTF-8 text);
- ``--question Q`` alone: the passage is standard input, as plain text;
- neither: standard input holds JSON lines ``{"question": ..., "context": ..., "id": ...}`` (``id`` optional);
- ``--input FILE``: a SQuAD-format JSON file (``{"data": [...]}``; its question ids are kept, gold answers
  ignored) or a JSON-lines file as above.

What it prints: for one question on standard output, the answer with its character offsets in the passage
(``context[start:end]``) and its score (start + end logit), or "no answer" with the margin that decided it;
``--top-k N`` lists the N best spans. Several questions, ``--json``, or ``--output FILE`` give JSON lines, one per
question ([`to_dict`][structattn.sgnet.reader.Reading.to_dict]). A passage longer than the model's window is read in
windows as ``structattn predict`` does; nothing is cut silently.

    structattn answer --model runs/squad2/best --question "Who built it?" --context "Rome built it."
    echo "Rome built it." | structattn answer --model sgnet-squad2 --question "Who built it?"
    structattn answer --model sgnet-squad2 --input dev-v2.0.json --output answers.jsonl
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import trained_model
from ..errors import UserError
from ..io import STDIN, decode_lines
from ..paths import check_input_file, check_output_file
from ..textcheck import check_json_text, check_text


def add_parser(sub) -> None:
    p = sub.add_parser("answer", help="answer questions about passages with a trained reader",
                       description="Answer a question about a passage (or many) with a trained span-QA reader: "
                                   "the answer's text, its character offsets in the passage and its score, or "
                                   "'no answer'.")
    p.add_argument("--model", required=True, metavar="NAME|DIR", type=trained_model("reader"),
                   help="a shipped reader's name (structattn models), a span-QA run's best/ folder or a packed one")
    p.add_argument("--question", default=None, help="the question (without --context/--context-file: the "
                                                     "passage is read from standard input as plain text)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--context", default=None, help="the passage")
    source.add_argument("--context-file", default=None, metavar="FILE", help="the passage, a UTF-8 text file")
    source.add_argument("--input", default=None, metavar="FILE",
                        help="many questions: a SQuAD-format JSON file or JSON lines {question, context, id}")
    p.add_argument("--output", default=None, metavar="FILE", help="write JSON lines here (default: stdout)")
    p.add_argument("--json", action="store_true", help="print JSON lines also for a single question")
    p.add_argument("--top-k", type=int, default=1, help="best spans listed per question (default 1)")
    p.add_argument("--na-threshold", default=None, metavar="T",
                   help="answer 'no answer' when the null score exceeds the best span's by more than T; 'never' "
                        "always answers (default: the threshold saved with the model)")
    p.set_defaults(func=run)


def _decode(data: bytes, where: str) -> str:
    """UTF-8 bytes -> the text exactly as given (offsets index it); bytes that are not UTF-8 (a binary file) and
    control characters are refused in one line naming where they are (`structattn.io.decode_lines`)."""
    decode_lines(data, where)
    return data.decode("utf-8-sig")


def _read_text(path: str, flag: str) -> str:
    """The UTF-8 text of the file ``path`` given to ``flag`` (a folder, a missing or unreadable file refused)."""
    check_input_file(path, flag)
    try:
        return _decode(Path(path).read_bytes(), path)
    except OSError as exc:
        raise UserError(f"{flag}: cannot read {path}: {exc.strerror}") from None


def _stdin(what: str) -> str:
    if sys.stdin is None or sys.stdin.isatty():
        raise UserError(f"no input: {what} is read from standard input, which is a terminal; pipe it in, or give "
                        "--question with --context/--context-file, or --input FILE")
    stream = getattr(sys.stdin, "buffer", None)  # bytes, so that bad bytes are reported, not replaced
    data = stream.read() if stream is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
    return _decode(data, STDIN)


def json_lines(text: str, source: str) -> list[tuple[str, str, str]]:
    """``(id, question, context)`` of every non-empty line of ``text`` (JSON objects with ``question`` and
    ``context``, ``id`` optional: ``q<line index>``)."""
    check_json_text(text, source)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{source} line {n} is not JSON ({exc.msg}); give one object "
                            '{"question": ..., "context": ...} per line, or --question with the passage as plain '
                            "text") from None
        if not isinstance(record, dict) or not {"question", "context"} <= set(record):
            raise UserError(f"{source} line {n}: an object with \"question\" and \"context\" is needed")
        qid = record.get("id", f"q{len(out)}")
        out.append((str(qid), record["question"], record["context"]))
    if not out:
        raise UserError(f"{source} holds no questions")
    return out


def _questions(args):
    """The questions to answer (``SquadQuestion`` records) and where they came from."""
    from ..tasks.squad import load_squad, read_squad
    from ..sgnet.reader import make_questions

    if args.input is not None:
        if args.question is not None:
            raise UserError("--input holds its own questions; drop --question (or drop --input)")
        text = _read_text(args.input, "--input")
        check_json_text(text, args.input)
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, dict) and "data" in whole:
            return read_squad(load_squad(args.input)), args.input
        if whole is not None and not (isinstance(whole, dict) and {"question", "context"} <= set(whole)):
            raise UserError(f"{args.input} is JSON but neither SQuAD format ({{\"data\": [...]}}) nor JSON lines "
                            '{"question": ..., "context": ...}')
        return make_questions(json_lines(text, args.input)), args.input
    if args.question is None:
        if args.context is not None or args.context_file is not None:
            raise UserError("give the question with --question (or question and context as JSON lines on "
                            "standard input)")
        return make_questions(json_lines(_stdin("the questions"), "standard input")), "standard input"
    check_text(args.question, "--question")
    if args.context is not None:
        context = args.context
        check_text(context, "--context")
    elif args.context_file is not None:
        context = _read_text(args.context_file, "--context-file")
    else:
        context = _stdin("the passage")
    return make_questions([("q0", args.question, context)]), "the question"


def _describe(reading) -> list[str]:
    """Lines for people: the answer (or no answer) and, with top-k, the other spans."""
    def span(a):
        return f"{a.text!r} (characters {a.start}-{a.end}, score {a.score:.3f}, probability {a.probability:.3f})"

    if reading.has_answer:
        lines = [f"answer: {span(reading.answers[0])}"]
    else:
        lines = [f"no answer: null score - best span score = {reading.na_score:.3f}, above the threshold "
                 f"{reading.threshold:g}; best span {span(reading.answers[0])}"]
    lines += [f"{k}. {span(a)}" for k, a in enumerate(reading.answers[1:], 2)]
    return lines


def run(args) -> int:
    from ..sgnet.reader import Reader
    from .predict import parse_na_threshold

    if args.top_k < 1:
        raise UserError(f"--top-k {args.top_k}: give a positive number of spans")
    threshold = None if args.na_threshold is None else parse_na_threshold(args.na_threshold)
    check_output_file(args.output, "--output")
    questions, source = _questions(args)  # bad input and output paths are refused before the model loads
    reader = Reader.from_pretrained(args.model, na_threshold=threshold)
    readings = reader.read_questions(questions, top_k=args.top_k, source=source)
    if args.output is None and len(readings) == 1 and not args.json:
        print("\n".join(_describe(readings[0])))
        return 0
    lines = [json.dumps({**r.to_dict(), "question": q.question}, ensure_ascii=False) + "\n"
             for q, r in zip(questions, readings)]
    if args.output is None:
        sys.stdout.writelines(lines)
    else:
        from ..io import atomic_write_text

        atomic_write_text(Path(args.output), "".join(lines))
        empty = sum(not r.has_answer for r in readings)
        noun = "question" if len(readings) == 1 else "questions"
        print(f"{len(readings):,} {noun} of {source} ({empty:,} answered with no answer): wrote {args.output}",
              file=sys.stderr)
    return 0
