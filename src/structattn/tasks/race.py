"""RACE (Lai et al., EMNLP 2017): English exams for Chinese middle- and high-school students.

Layout of the official release::

    race/{train,dev,test}/{middle,high}/<number>.txt

Each file is one JSON object (one passage and its questions)::

    {"article": "...", "questions": ["...", ...], "options": [["A text", "B text", "C text", "D text"], ...],
     "answers": ["B", ...], "id": "middle2177.txt"}

``questions``, ``options`` and ``answers`` run in parallel; an answer is the letter of the correct
option. About half of the questions are cloze sentences with a blank ``_`` where the answer goes (see
`structattn.sgnet.multiple_choice_features` for how an option fills it). Texts are kept exactly as released.

Order: levels in the order asked, files by their number (then name), questions in file order, so a
``limit`` always takes the same questions. Question ids are ``<id>:<k>`` (``middle2177.txt:0``); a
file without ``id`` uses ``<level><file name>``, which is what the release's ids are.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError
from ..textcheck import check_json_text
from .mc_question import SPLITS, MCQuestion, answer_index, predicted_indices

LEVELS = ("middle", "high")
NUM_OPTIONS = 4  # every RACE question has options A-D
_KEYS = ("article", "questions", "options", "answers")


def _file_order(path: Path):
    return (0, int(path.stem), path.name) if path.stem.isdigit() else (1, 0, path.name)


def read_race_file(path: Path, level: str) -> list[MCQuestion]:
    """The questions of one passage file (``level`` becomes their group).

    Raises:
        UserError: naming the file: not UTF-8 JSON, a key missing, lists of different lengths, an empty
            article, question option list or option, or an answer that is not an option's letter.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
        check_json_text(text, str(path))
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a UTF-8 JSON object ({exc}); each RACE file holds one passage as JSON") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object with keys {', '.join(_KEYS)}")
    missing = [k for k in _KEYS if k not in data]
    if missing:
        raise UserError(f"{path}: key(s) {', '.join(missing)} missing; a RACE file has {', '.join(_KEYS)} and id")
    article, questions, options, answers = (data[k] for k in _KEYS)
    if not isinstance(article, str) or not article.strip():
        raise UserError(f"{path}: 'article' is empty or not a string")
    if not all(isinstance(v, list) for v in (questions, options, answers)):
        raise UserError(f"{path}: 'questions', 'options' and 'answers' must be lists")
    if not len(questions) == len(options) == len(answers):
        raise UserError(f"{path}: {len(questions)} questions, {len(options)} option lists and {len(answers)} answers; "
                        "they must run in parallel (one of each per question)")
    pid = data.get("id") or f"{level}{path.name}"
    out = []
    for k, (question, opts, answer) in enumerate(zip(questions, options, answers)):
        where = f"{path}: question {k} (id {pid}:{k})"
        if not isinstance(question, str):
            raise UserError(f"{where}: the question is not a string")
        if (not isinstance(opts, list) or len(opts) != NUM_OPTIONS
                or not all(isinstance(o, str) and o.strip() for o in opts)):
            raise UserError(f"{where}: options must be a list of {NUM_OPTIONS} non-empty strings (A-D), got {opts!r}")
        if not isinstance(answer, str):
            raise UserError(f"{where}: answer {answer!r} is not a letter")
        out.append(MCQuestion(qid=f"{pid}:{k}", passage=article, question=question, options=list(opts),
                              label=answer_index(answer, len(opts), where), group=level))
    return out


def read_race(root: str | Path, split: str, levels: tuple[str, ...] | list[str] = LEVELS,
              limit: int = 0) -> list[MCQuestion]:
    """The questions of one split of RACE.

    Args:
        root: the ``race`` folder (holding ``train/``, ``dev/``, ``test/``).
        split: ``train``, ``dev`` or ``test``.
        levels: which levels, in this order (``middle``, ``high`` or both).
        limit: when > 0, only the first ``limit`` questions (in the order of the module docstring).
    Raises:
        UserError: an unknown split or level, a missing or empty level folder, or a bad file (named).
    """
    root = Path(root)
    if split not in SPLITS:
        raise UserError(f"unknown RACE split {split!r}; valid splits: {', '.join(SPLITS)}")
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad or not levels:
        raise UserError(f"RACE levels must be among {', '.join(LEVELS)}, got {list(levels)!r}")
    if limit < 0:
        raise UserError(f"limit must be >= 0 (0 = every question), got {limit}")
    out: list[MCQuestion] = []
    for level in levels:
        folder = root / split / level
        if not folder.is_dir():
            raise UserError(f"{folder}: folder not found; RACE is read from <race>/{{train,dev,test}}/{{middle,high}}/"
                            "*.txt (the official release unpacked), under the data folder or STRUCTATTN_DATA")
        files = sorted(folder.glob("*.txt"), key=_file_order)
        if not files:
            raise UserError(f"{folder}: no .txt passage files; unpack the official RACE release there")
        for path in files:
            out.extend(read_race_file(path, level))
            if 0 < limit <= len(out):
                return out[:limit]
    return out


# ------------------------------------------------------------------------------------------- scoring
def score_race(questions: list[MCQuestion], predictions: dict, source: str = "the split") -> dict:
    """Accuracy of predicted option letters as the RACE papers count it (Lai et al. 2017, Table 4): correct answers
    over *all* questions, overall (RACE: the middle and high questions pooled, not the mean of the two levels) and
    per level present (RACE-M, RACE-H); percentages.

    Args:
        questions: the gold questions of a split (every one labelled; `read_race`).
        predictions: question id -> option letter (``"A"`` .. ``"D"``).
        source: names the split in errors.
    Returns:
        ``{"accuracy", "correct", "total", "missing"}`` and, per level, ``accuracy_<level>``, ``correct_<level>``,
        ``total_<level>`` (levels in the order of first appearance). A question without a prediction counts as
        wrong (the denominator is every question, as in the papers); ``missing`` says how many.
    Raises:
        UserError: an id that is not a question of ``questions`` (naming the first ones), a value that is not an
            option letter (naming its id), a question without a gold answer, or no questions.
    """
    if not questions:
        raise UserError(f"{source}: no questions to score")
    picked = predicted_indices(questions, predictions, source)
    counts: dict[str, list[int]] = {}  # level -> [correct, total]
    for q in questions:
        if q.label is None:
            raise UserError(f"{source}: question {q.qid!r} has no gold answer; this split cannot be scored")
        hit = int(picked.get(q.qid) == q.label)
        for key in ("", q.group):
            counts.setdefault(key, [0, 0])
            counts[key][0] += hit
            counts[key][1] += 1
    correct, total = counts.pop("")
    out: dict = {"accuracy": 100.0 * correct / total, "correct": correct, "total": total,
                 "missing": sum(1 for q in questions if q.qid not in picked)}
    for level, (hit, seen) in counts.items():
        out.update({f"accuracy_{level}": 100.0 * hit / seen, f"correct_{level}": hit, f"total_{level}": seen})
    return out
