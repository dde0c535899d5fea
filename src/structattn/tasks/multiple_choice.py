"""Multiple-choice reading comprehension: the question record, the task registry and accuracy.

A question (`MCQuestion`) has a passage, a question text and C candidate answers (options); the
model picks one. Benchmarks (``MC_TASKS``, look one up with `get_mc_task`):

===========  ========================================  ==========================  ==================
name         data (under ``settings.data_dir()``)       splits                      groups
===========  ========================================  ==========================  ==================
race         race/{train,dev,test}/{middle,high}/*.txt  train / dev / test          middle, high
race_m       race/{train,dev,test}/middle/*.txt         train / dev / test          middle
race_h       race/{train,dev,test}/high/*.txt           train / dev / test          high
mctest160    mctest/mc160.{train,dev,test}.tsv + .ans   train / dev / test          mc160
mctest500    mctest/mc500.{train,dev,test}.tsv + .ans   train / dev / test          mc500
===========  ========================================  ==========================  ==================

Every question of these sets has 4 options. RACE's test answers are public, and MCTest's test
answers ship in the folder (``.ans``), so every split is labelled. The metric is accuracy (RACE's
and MCTest's official one), as a fraction in [0, 1], overall and per group (RACE-M / RACE-H are the
``middle`` / ``high`` groups of ``race``); see `accuracy`.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import UserError
from .base import registered
from ..settings import data_dir as _default_data_dir
from .mc_question import SPLITS, MCQuestion, answer_index  # noqa: F401  (re-exported for its callers)
from .mc_question import predicted_indices

# ------------------------------------------------------------------------------------------ registry
Reader = Callable[[Path, str, int], "list[MCQuestion]"]


@dataclass(frozen=True)
class MCTaskSpec:
    """A multiple-choice benchmark.

    Attributes:
        name: registry name.
        folder: its folder relative to the data folder.
        reader: ``reader(folder_path, split, limit) -> list[MCQuestion]``; use `read`.
        groups: the values ``MCQuestion.group`` takes (`accuracy` reports each).
        num_choices: options per question.
        note: caveats about the data.
    """

    name: str
    folder: str
    reader: Reader
    groups: tuple[str, ...]
    num_choices: int = 4
    main_metric: str = "accuracy"
    splits: tuple[str, ...] = SPLITS
    note: str = ""

    def path(self, data_dir: str | Path | None = None) -> Path:
        """The task's folder under ``data_dir`` (default [`settings.data_dir`][structattn.settings.data_dir])."""
        root = Path(data_dir) if data_dir is not None else _default_data_dir()
        return root / self.folder

    def read(self, split: str, data_dir: str | Path | None = None, limit: int = 0) -> list[MCQuestion]:
        """The questions of ``split`` (the first ``limit`` of them when ``limit`` > 0)."""
        if split not in self.splits:
            raise UserError(f"task {self.name}: unknown split {split!r}; valid splits: {', '.join(self.splits)}")
        return self.reader(self.path(data_dir), split, limit)


def _race(levels: tuple[str, ...]) -> Reader:
    def read(folder: Path, split: str, limit: int) -> list[MCQuestion]:
        from .race import read_race  # race imports MCQuestion from here

        return read_race(folder, split, levels=levels, limit=limit)

    return read


def _mctest(name: str) -> Reader:
    def read(folder: Path, split: str, limit: int) -> list[MCQuestion]:
        from .mctest import read_mctest  # mctest imports MCQuestion from here

        questions = read_mctest(folder, name, split)
        return questions[:limit] if limit > 0 else questions

    return read


_RACE_NOTE = "RACE (Lai et al. 2017), official release; CMU's terms: non-commercial research use only"
_MCTEST_NOTE = ("MCTest (Richardson et al. 2013); a small set: 4 questions per story, test answers from Microsoft's "
                "separate archive")

MC_TASKS: dict[str, MCTaskSpec] = {spec.name: spec for spec in (
    MCTaskSpec("race", "race", _race(("middle", "high")), ("middle", "high"), note=_RACE_NOTE),
    MCTaskSpec("race_m", "race", _race(("middle",)), ("middle",), note=_RACE_NOTE + "; middle-school level only"),
    MCTaskSpec("race_h", "race", _race(("high",)), ("high",), note=_RACE_NOTE + "; high-school level only"),
    MCTaskSpec("mctest160", "mctest", _mctest("mc160"), ("mc160",), note=_MCTEST_NOTE),
    MCTaskSpec("mctest500", "mctest", _mctest("mc500"), ("mc500",), note=_MCTEST_NOTE),
)}


#: The results files of the multiple-choice benchmarks (without ``.jsonl``): one per data folder, each line's "task"
#: naming its task (race_m, mctest500 ...).
MC_RESULT_FILES = tuple(dict.fromkeys(spec.folder for spec in MC_TASKS.values()))  # ("race", "mctest")


def mc_tasks_in(folder: str) -> tuple[str, ...]:
    """The multiple-choice tasks that read ``folder`` (``"race"`` -> race, race_m, race_h)."""
    return tuple(name for name, spec in MC_TASKS.items() if spec.folder == folder)


def results_file(task: str) -> str:
    """The results file (without ``.jsonl``) and prediction folder of ``task``'s runs: a multiple-choice task's data
    folder (``race_m`` -> ``race``, ``mctest500`` -> ``mctest``), else the task's name."""
    spec = MC_TASKS.get(task)
    return spec.folder if spec is not None else task

def get_mc_task(name: str) -> MCTaskSpec:
    """The task registered as ``name``; an unknown name raises [`UserError`][structattn.errors.UserError] listing the
    valid ones."""
    return registered(MC_TASKS, name, "multiple-choice task")


# ------------------------------------------------------------------------------------------- metric
def accuracy(preds: Sequence[int] | Mapping[str, int], questions: Sequence[MCQuestion]) -> dict[str, float]:
    """Accuracy of predicted option indices.

    Args:
        preds: one option index per question, in the order of ``questions``, or ``{qid: index}`` holding
            every question.
        questions: the gold questions (every one labelled).
    Returns:
        ``accuracy`` (fraction in [0, 1]), ``accuracy_<group>`` for each group present (in order of first
        appearance), ``accuracy_<kind>`` for each non-empty kind present (MCTest's ``one`` / ``multiple``),
        and ``total`` (number of questions).
    Raises:
        UserError: counts differ, a prediction is missing, or a question has no label.
    """
    if isinstance(preds, Mapping):
        missing = [q.qid for q in questions if q.qid not in preds]
        if missing:
            raise UserError(f"no prediction for {len(missing)} of {len(questions)} questions (first: "
                            f"{', '.join(missing[:3])}); predict every question of the split")
        preds = [preds[q.qid] for q in questions]
    preds = list(preds)
    if len(preds) != len(questions):
        raise UserError(f"{len(preds)} predictions for {len(questions)} questions; give one per question, in order")
    if not questions:
        raise UserError("no questions to score")
    unlabelled = [q.qid for q in questions if q.label is None]
    if unlabelled:
        raise UserError(f"{len(unlabelled)} questions have no gold answer (first: {', '.join(unlabelled[:3])}); "
                        "this split cannot be scored")
    right: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # key -> [correct, seen]
    for pred, q in zip(preds, questions):
        hit = int(int(pred) == q.label)
        for key in ("accuracy", f"accuracy_{q.group}") + ((f"accuracy_{q.kind}",) if q.kind else ()):
            right[key][0] += hit
            right[key][1] += 1
    out: dict[str, float] = {"accuracy": right["accuracy"][0] / right["accuracy"][1]}
    for key, (hit, seen) in right.items():
        if key != "accuracy":
            out[key] = hit / seen
    out["total"] = len(questions)
    return out


def score_option_letters(task: str, questions: Sequence[MCQuestion], letters: Mapping[str, str],
                         split: str = "test") -> dict:
    """Accuracy in percent of ``letters`` ({qid: option letter}, what ``structattn predict`` writes to a ``.json``)
    on ``questions`` (``task``'s ``split``): RACE tasks as ``structattn score race`` counts it
    (`score_race`), the others (MCTest) as ``structattn score mctest`` does: by
    `accuracy` per group and kind (every question needs a letter). An unknown id or a value that is not an
    option letter is a [`UserError`][structattn.errors.UserError] either way (`predicted_indices`)."""
    source = f"{task}/{split}"
    if task.startswith("race"):
        from .race import score_race

        return score_race(list(questions), dict(letters), source=source)
    picked = predicted_indices(questions, dict(letters), source)
    return {key: 100.0 * value if key.startswith("accuracy") else value
            for key, value in accuracy(picked, questions).items()}
