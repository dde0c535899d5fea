"""The multiple-choice question record (`MCQuestion`) and answer letters, shared by every reader
(RACE, MCTest) and by the registry in `structattn.tasks.multiple_choice`."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError

SPLITS = ("train", "dev", "test")


@dataclass(slots=True)
class MCQuestion:
    """One multiple-choice question.

    Attributes:
        qid: unique within a split: ``<passage id>:<question number from 0>`` (RACE ``middle2177.txt:0``,
            MCTest ``mc160.dev.0:3``).
        passage: the passage text as released (RACE newlines kept; MCTest ``\\newline`` / ``\\tab`` unescaped).
        question: the question text (MCTest: without its ``one:`` / ``multiple:`` prefix). RACE cloze
            questions hold a blank ``_`` where the answer goes.
        options: the candidate answers, in order (A, B, C, D).
        label: index of the correct option, or None when the split has no answers.
        group: RACE's level (``middle`` / ``high``) or MCTest's set (``mc160`` / ``mc500``).
        kind: MCTest's prefix (``one``: the answer needs one sentence of the story, ``multiple``: several);
            ``""`` for RACE.
    """

    qid: str
    passage: str
    question: str
    options: list[str]
    label: int | None
    group: str
    kind: str = ""


def answer_index(letter: str, num_options: int, where: str) -> int:
    """``"A"`` -> 0, ``"B"`` -> 1, ...; [`UserError`][structattn.errors.UserError] naming ``where`` for anything
    else."""
    value = letter.strip()
    if len(value) == 1 and "A" <= value <= "Z" and ord(value) - ord("A") < num_options:
        return ord(value) - ord("A")
    valid = ", ".join(chr(ord("A") + i) for i in range(num_options))
    raise UserError(f"{where}: answer {letter!r} is not one of {valid}; fix the answer")


def predicted_indices(questions, predictions: dict, source: str) -> dict[str, int]:
    """Predicted option letters ({qid: ``"A"`` ..}, what ``structattn predict`` writes) as option indices.

    Args:
        questions: the questions of the split (`MCQuestion`).
        predictions: question id -> option letter; questions may be missing (the scorer decides what that means).
        source: names the split in errors.
    Raises:
        UserError: an id that is not a question of the split (naming the first ones), or a value that is not one
            of its question's option letters (naming its id).
    """
    gold = {q.qid: q for q in questions}
    unknown = [qid for qid in predictions if qid not in gold]
    if unknown:
        shown = ", ".join(repr(q) for q in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        example = f", e.g. {questions[0].qid}" if questions else ""
        raise UserError(f"{len(unknown)} predicted question id(s) are not questions of {source} (first: {shown}); "
                        f"predict this split's questions (ids <passage id>:<question number>{example}), or score "
                        "against the split they come from (--split, --task)")
    picked = {}
    for qid, letter in predictions.items():
        letters = [chr(ord("A") + i) for i in range(len(gold[qid].options))]
        if not isinstance(letter, str) or letter.strip() not in letters:
            raise UserError(f"question {qid!r}: prediction {letter!r} is not an option letter ({', '.join(letters)}); "
                            "the prediction file maps question id -> letter of the chosen option")
        picked[qid] = letters.index(letter.strip())
    return picked
