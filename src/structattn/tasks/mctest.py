"""MCTest (Richardson et al., EMNLP 2013): children's stories with 4 questions of 4 options each.

Files (``mctest/``, the official release): ``mc160|mc500.{train,dev,test}.tsv`` and ``.ans``.

* ``.tsv``: one story per line, tab-separated: ``id``, ``properties`` (``Author: ...;Work Time(s): ...``),
  ``story``, then per question ``question`` and its answers ``A``, ``B``, ``C``, ``D`` (23 fields for the
  4 questions). Newlines and tabs inside a story are written ``\\newline`` and ``\\tab`` (the two-character
  escapes are turned back into the characters here). Each question starts with ``one:`` or ``multiple:``
  (whether its answer needs one sentence of the story or several): the prefix is removed from the text
  and kept as `MCQuestion.kind`.
* ``.ans``: the same lines, each the letters of the correct answers (``A<tab>C<tab>B<tab>B``).

A missing ``.ans`` file gives unlabelled questions (``label=None``: predict only; a warning is logged).
Question ids are ``<story id>:<k>`` (``mc160.dev.0:3``).
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

from ..errors import UserError
from .base import read_lines
from .mc_question import SPLITS, MCQuestion, answer_index

log = logging.getLogger(__name__)

SETS = ("mc160", "mc500")
NUM_OPTIONS = 4
_HEAD_FIELDS = 3  # id, properties, story
_PREFIX = re.compile(r"^\s*(one|multiple)\s*:\s*")


def unescape(text: str) -> str:
    """MCTest's story escapes back to characters: ``\\newline`` -> newline, ``\\tab`` -> tab."""
    return text.replace("\\newline", "\n").replace("\\tab", "\t")


def split_prefix(question: str) -> tuple[str, str]:
    """``"one: Who ...?"`` -> ``("one", "Who ...?")``; a question without a prefix gets kind ``""``."""
    m = _PREFIX.match(question)
    if m is None:
        return "", question.strip()
    return m.group(1), question[m.end():].strip()


def read_mctest_files(tsv: str | Path, ans: str | Path | None, group: str) -> list[MCQuestion]:
    """The questions of one ``.tsv`` file and its ``.ans`` file (None: unlabelled).

    Raises:
        UserError: naming file and line: a line whose fields are not id, properties, story and groups of
            a question with 4 answers; an empty story, question or answer; an ``.ans`` file with another
            number of lines or answers, or a letter that is not A-D.
    """
    tsv = Path(tsv)
    rows = read_lines(tsv)
    answers = None
    if ans is not None:
        answers = read_lines(Path(ans))
        if len(answers) != len(rows):
            raise UserError(f"{ans}: {len(answers)} lines for the {len(rows)} stories of {tsv}; each story needs "
                            "one line of answers")
    out: list[MCQuestion] = []
    for number, line in enumerate(rows, 1):
        where = f"{tsv}:{number}"
        fields = line.split("\t")
        n_q, rest = divmod(len(fields) - _HEAD_FIELDS, NUM_OPTIONS + 1)
        if n_q < 1 or rest:
            raise UserError(f"{where}: {len(fields)} tab-separated fields; expected id, properties, story and "
                            f"{NUM_OPTIONS + 1} fields (question, answers A-D) per question (23 for 4 questions)")
        story_id, story = fields[0].strip(), unescape(fields[2])
        if not story_id or not story.strip():
            raise UserError(f"{where}: the story id or the story is empty")
        letters = None
        if answers is not None:
            letters = answers[number - 1].split("\t")
            if len(letters) != n_q:
                raise UserError(f"{ans}:{number}: {len(letters)} answers for the {n_q} questions of {where}")
        for k in range(n_q):
            group_fields = fields[_HEAD_FIELDS + k * (NUM_OPTIONS + 1):_HEAD_FIELDS + (k + 1) * (NUM_OPTIONS + 1)]
            kind, question = split_prefix(group_fields[0])
            options = [o.strip() for o in group_fields[1:]]
            if not question or not all(options):
                raise UserError(f"{where}: question {k + 1} or one of its answers is empty")
            label = None if letters is None else answer_index(letters[k], NUM_OPTIONS,
                                                              f"{ans}:{number}: question {k + 1}")
            out.append(MCQuestion(qid=f"{story_id}:{k}", passage=story, question=question, options=options,
                                  label=label, group=group, kind=kind))
    return out


def read_mctest(root: str | Path, name: str, split: str) -> list[MCQuestion]:
    """The questions of ``<root>/<name>.<split>.tsv`` (+ ``.ans``); ``name`` is ``mc160`` or ``mc500``.

    Raises:
        UserError: an unknown set or split, a missing ``.tsv``, or a bad line (named).
    """
    if name not in SETS:
        raise UserError(f"unknown MCTest set {name!r}; valid sets: {', '.join(SETS)}")
    if split not in SPLITS:
        raise UserError(f"unknown MCTest split {split!r}; valid splits: {', '.join(SPLITS)}")
    root = Path(root)
    tsv, ans = root / f"{name}.{split}.tsv", root / f"{name}.{split}.ans"
    if not ans.exists():
        log.warning("%s not found: the questions of %s are unlabelled (predict only)", ans, tsv)
        ans = None
    return read_mctest_files(tsv, ans, name)
