"""SQuAD files: reading and checking the official JSON, questions as records, article-level splits, the task
registry of the span-QA tasks, and answer-to-word alignment.

Data (see ``SOURCE.md`` beside each file; both were rebuilt from the SQuAD-explorer pages, answer texts and ids are
the official ones, some ``answer_start`` values are inferred):

* ``squad2/dev-v2.0.reconstructed-from-explorer.json``: SQuAD 2.0 dev, 35 articles, 11,873 questions (5,945
  unanswerable). The 2.0 train file could not be obtained, so task ``squad2`` splits this file by *article*
  (`article_split`, recorded in the package's ``squad2_split.json``): ``test`` = at least a third of the questions;
  the rest is the train part, of which a held-out slice of whole articles (at least 15 % of its questions, the same
  rule with another salt) is ``dev`` and the remainder ``train``. Scores on this ``test`` are not comparable with
  published SQuAD 2.0 dev scores (different, much smaller training data).
* ``squad11/{train,dev}-v1.1.reconstructed-from-explorer.json``: SQuAD 1.1 (87,599 / 10,570 questions, every
  question answerable). Task ``squad11``: ``train`` = train file, ``dev`` = ``test`` = dev file (the official test
  set is hidden, so the dev file is the reported test, as in the papers).
* task ``squad2_plus11``: ``squad2``'s dev and test parts, and for training its train part followed by all of
  SQuAD 1.1 train (the reader a user would train: 93,904 questions, 3,021 of them unanswerable).

Format (the official one)::

    {"version": "v2.0", "data": [{"title": str, "paragraphs": [{"context": str, "qas": [
        {"id": str, "question": str, "answers": [{"text": str, "answer_start": int}, ...],
         "is_impossible": bool (2.0 only; absent = answerable iff answers is not empty)}]}]}]}

`validate_squad` checks exactly this (other keys, e.g. ``plausible_answers``, are allowed and ignored) and
names the article, paragraph and question of the first problem. An answer whose text differs from
``context[answer_start:answer_start + len(text)]`` is *not* an error (the scorer reads texts only); such answers
cannot be aligned (`answer_word_span` gives None), and the feature builder counts them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import UserError
from .base import registered

log = logging.getLogger(__name__)

SQUAD2_FILE = "squad2/dev-v2.0.reconstructed-from-explorer.json"
SQUAD11_TRAIN_FILE = "squad11/train-v1.1.reconstructed-from-explorer.json"
SQUAD11_DEV_FILE = "squad11/dev-v1.1.reconstructed-from-explorer.json"
#: the article split of the SQuAD 2.0 file, shipped with the package (an input of every squad2 run)
SQUAD2_SPLIT_FILE = Path(__file__).with_name("squad2_split.json")
#: least share of the questions in the squad2 test part, and in the dev slice of its train part
TEST_FRACTION = 1 / 3
DEV_FRACTION = 0.15
#: salt of the dev slice's article order (the test split uses none), so the two orders are unrelated
DEV_SALT = "dev:"
_REGENERATE = "regenerate it with `python -m structattn.tasks.squad --write-split src/structattn/tasks/squad2_split.json`"


# ----------------------------------------------------------------------------------------- read + check
def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_squad(dataset, source: str = "<dataset>") -> None:
    """Check the official SQuAD layout (module docstring); UserError naming ``source``, the article (index and
    title), paragraph and question of the first problem.

    Problems: not ``{"data": [...]}``; an article without a string ``title`` or a ``paragraphs`` list; a
    paragraph without a string ``context`` or a ``qas`` list; a question without a non-empty string ``id``
    (or an id seen before), a string ``question`` or an ``answers`` list; an empty context; an answer without a
    string ``text`` or an integer ``answer_start`` inside the context, or whose ``answer_start`` does not point at
    its text; ``is_impossible`` not a bool, or contradicting the
    answers (true with answers, false without).
    """
    fix = "fix the file or give the official SQuAD JSON"
    if not isinstance(dataset, Mapping) or not isinstance(dataset.get("data"), list):
        raise UserError(f'{source}: expected a JSON object {{"version": ..., "data": [articles]}}; {fix}')
    seen: dict[str, str] = {}
    for a, article in enumerate(dataset["data"]):
        if not isinstance(article, Mapping) or not isinstance(article.get("title"), str):
            raise UserError(f"{source}: article {a}: no string 'title'; {fix}")
        where_a = f"{source}: article {a} ({article['title']!r})"
        if not isinstance(article.get("paragraphs"), list):
            raise UserError(f"{where_a}: no 'paragraphs' list; {fix}")
        for p, paragraph in enumerate(article["paragraphs"]):
            where_p = f"{where_a}, paragraph {p}"
            if not isinstance(paragraph, Mapping) or not isinstance(paragraph.get("context"), str):
                raise UserError(f"{where_p}: no string 'context'; {fix}")
            if not isinstance(paragraph.get("qas"), list):
                raise UserError(f"{where_p}: no 'qas' list; {fix}")
            context = paragraph["context"]
            if not context.strip():
                raise UserError(f"{where_p}: the context is empty; every paragraph needs its passage text")
            for q, qa in enumerate(paragraph["qas"]):
                if not isinstance(qa, Mapping) or not isinstance(qa.get("id"), str) or not qa["id"]:
                    raise UserError(f"{where_p}, question {q}: no non-empty string 'id'; {fix}")
                qid = qa["id"]
                where = f"{where_p}, question {q} (id {qid!r})"
                if qid in seen:
                    raise UserError(f"{where}: id already used by {seen[qid]}; question ids must be unique")
                seen[qid] = f"article {a}, paragraph {p}, question {q}"
                if not isinstance(qa.get("question"), str):
                    raise UserError(f"{where}: no string 'question'; {fix}")
                answers = qa.get("answers")
                if not isinstance(answers, list):
                    raise UserError(f"{where}: no 'answers' list (use [] for an unanswerable question); {fix}")
                for k, answer in enumerate(answers):
                    if not isinstance(answer, Mapping) or not isinstance(answer.get("text"), str):
                        raise UserError(f"{where}, answer {k}: no string 'text'; {fix}")
                    start = answer.get("answer_start")
                    if not _is_int(start):
                        raise UserError(f"{where}, answer {k}: 'answer_start' must be an integer character offset, "
                                        f"got {start!r}; {fix}")
                    if not 0 <= start <= start + len(answer["text"]) <= len(context):
                        raise UserError(f"{where}, answer {k}: answer_start {start} + {len(answer['text'])} "
                                        f"characters lies outside the context ({len(context)} characters); {fix}")
                    found = context[start:start + len(answer["text"])]
                    if found != answer["text"]:
                        raise UserError(f"{where}, answer {k}: answer_start {start} does not point at the answer "
                                        f"text {answer['text']!r} (the context there reads {found!r}); fix "
                                        "answer_start (the character offset of the answer in the context)")
                impossible = qa.get("is_impossible")
                if impossible is not None:
                    if not isinstance(impossible, bool):
                        raise UserError(f"{where}: 'is_impossible' must be true or false, got {impossible!r}; {fix}")
                    if impossible and answers:
                        raise UserError(f"{where}: is_impossible is true but it has {len(answers)} answer(s); "
                                        "an unanswerable question has 'answers': []")
                    if not impossible and not answers:
                        raise UserError(f"{where}: is_impossible is false but it has no answer; give its answers "
                                        "or set is_impossible to true")


def load_squad(path) -> dict:
    """The SQuAD JSON object of ``path``, checked by `validate_squad`.

    Raises:
        UserError: file missing, not UTF-8, not JSON, or not in the SQuAD layout (naming article and question).
    """
    from ..config_io import read_json

    path = Path(path)
    dataset = read_json(path, "file", missing="SQuAD files are read from the data folder, ../shared/data beside the "
                                              "repository unless STRUCTATTN_DATA names another")
    validate_squad(dataset, str(path))
    return dataset


@dataclass(slots=True)
class SquadQuestion:
    """One question with its paragraph.

    Attributes:
        qid: the question id (the key of a prediction).
        title: its article's title.
        question, context: the question text and its paragraph text, as in the file.
        answers: ``(text, answer_start)`` of every gold answer, in file order (duplicates kept); ``[]`` when
            unanswerable.
        is_impossible: True when the question has no answer.
        paragraph: index of its paragraph among all paragraphs of the dataset it was read from, in file order
            (questions of one paragraph share it: parse each paragraph once).
    """

    qid: str
    title: str
    question: str
    context: str
    answers: list[tuple[str, int]]
    is_impossible: bool
    paragraph: int


def read_squad(path_or_dict) -> list[SquadQuestion]:
    """Every question of a SQuAD file (path) or JSON object (checked by `validate_squad`), in file order."""
    if isinstance(path_or_dict, Mapping):
        dataset = path_or_dict
        validate_squad(dataset)
    else:
        dataset = load_squad(path_or_dict)
    out: list[SquadQuestion] = []
    paragraph_index = 0
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [(x["text"], x["answer_start"]) for x in qa["answers"]]
                out.append(SquadQuestion(qid=qa["id"], title=article["title"], question=qa["question"],
                                         context=paragraph["context"], answers=answers,
                                         is_impossible=qa.get("is_impossible", not answers),
                                         paragraph=paragraph_index))
            paragraph_index += 1
    return out


# ------------------------------------------------------------------------------------------------ splits
def _titles(dataset) -> dict[str, int]:
    """Title -> number of questions, titles in file order (an article title seen twice adds up)."""
    counts: dict[str, int] = {}
    for article in dataset["data"]:
        counts[article["title"]] = counts.get(article["title"], 0) + sum(len(p["qas"]) for p in article["paragraphs"])
    return counts


def _stable_key(title: str, salt: str) -> str:
    # sha256, not hash(): Python salts str hashes per process
    return hashlib.sha256((salt + title).encode("utf-8")).hexdigest()


def article_split(dataset, test_fraction: float = TEST_FRACTION, salt: str = "") -> dict[str, list[str]]:
    """Split the articles of ``dataset`` into ``{"train": [titles], "test": [titles]}``, each in file order.

    Deterministic from the titles alone: articles are taken in order of ``sha256(salt + title)`` into ``test``
    until it holds at least ``test_fraction`` of the questions; the rest is ``train``. No title is on both sides.

    Raises:
        UserError: ``test_fraction`` not in (0, 1), or fewer than two articles, or no article left for train.
    """
    if not 0 < test_fraction < 1:
        raise UserError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    counts = _titles(dataset)
    if len(counts) < 2:
        raise UserError(f"an article split needs at least 2 articles (distinct titles), got {len(counts)}")
    total = sum(counts.values())
    need = Fraction(test_fraction) * total
    test: set[str] = set()
    taken = 0
    for title in sorted(counts, key=lambda t: _stable_key(t, salt)):
        if taken >= need:
            break
        test.add(title)
        taken += counts[title]
    if len(test) == len(counts):
        raise UserError(f"test_fraction {test_fraction} leaves no article for train ({len(counts)} articles); "
                        "use a smaller fraction")
    return {"train": [t for t in counts if t not in test], "test": [t for t in counts if t in test]}


def subset(dataset, titles: Sequence[str]) -> dict:
    """A SQuAD JSON object with only the articles titled ``titles``, in file order (article objects are shared,
    not copied); the ``version`` is kept.

    Raises:
        UserError: a title that is not in ``dataset`` (naming the first ones).
    """
    wanted = set(titles)
    unknown = sorted(wanted - set(_titles(dataset)))
    if unknown:
        raise UserError(f"{len(unknown)} title(s) not in the dataset: {', '.join(map(repr, unknown[:5]))}"
                        f"{', ...' if len(unknown) > 5 else ''}")
    out = {"data": [article for article in dataset["data"] if article["title"] in wanted]}
    if "version" in dataset:
        out = {"version": dataset["version"], **out}
    return out


def check_split(split, dataset, source: str) -> dict[str, list[str]]:
    """``split`` (``{"train": [...], "test": [...]}``) checked against ``dataset``: both lists of titles, no title on
    both sides or twice, every title of the dataset on exactly one side. Returns it; UserError naming ``source``."""
    if not isinstance(split, Mapping) or set(split) != {"train", "test"} or not all(
            isinstance(split[k], list) and all(isinstance(t, str) for t in split[k]) for k in ("train", "test")):
        raise UserError(f'{source}: expected {{"train": [titles], "test": [titles]}}; {_REGENERATE}')
    train, test = split["train"], split["test"]
    problems = []
    both = sorted(set(train) & set(test))
    if both:
        problems.append(f"{len(both)} title(s) on both sides ({', '.join(map(repr, both[:3]))})")
    if len(set(train)) != len(train) or len(set(test)) != len(test):
        problems.append("a title listed twice")
    titles = set(_titles(dataset))
    unknown = sorted((set(train) | set(test)) - titles)
    if unknown:
        problems.append(f"{len(unknown)} title(s) not in the data ({', '.join(map(repr, unknown[:3]))})")
    absent = sorted(titles - set(train) - set(test))
    if absent:
        problems.append(f"{len(absent)} title(s) of the data on neither side ({', '.join(map(repr, absent[:3]))})")
    if problems:
        raise UserError(f"{source}: {'; '.join(problems)}; {_REGENERATE}")
    return {"train": list(train), "test": list(test)}


def _default_split_file() -> Path | None:
    """The package's ``squad2_split.json``; None if the installation lacks it."""
    return SQUAD2_SPLIT_FILE if SQUAD2_SPLIT_FILE.is_file() else None


def squad2_split(dataset, split_file=None) -> dict[str, list[str]]:
    """The article split of the SQuAD 2.0 file: read from ``split_file`` (default: the committed
    ``squad2_split.json`` of the package) and checked against ``dataset``; when no file is found, computed by
    `article_split` (the committed file equals it: a data test checks this)."""
    path = Path(split_file) if split_file is not None else _default_split_file()
    if path is None:
        log.info("%s not found; computing the squad2 article split", SQUAD2_SPLIT_FILE)
        return article_split(dataset, TEST_FRACTION)
    if not path.is_file():
        raise UserError(f"{path}: split file not found; {_REGENERATE}")
    try:
        split = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a JSON file ({exc}); {_REGENERATE}") from None
    return check_split(split, dataset, str(path))


# ------------------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class QASplit:
    """One split of a span-QA task: its questions and the SQuAD JSON object the scorer needs.

    Attributes:
        task, split: names. questions: `read_squad` of ``dataset``.
        dataset: a valid SQuAD JSON object holding exactly this split's articles.
        source: the file it was read from.
    """

    task: str
    split: str
    questions: list[SquadQuestion]
    dataset: dict
    source: Path


@dataclass(frozen=True)
class QATask:
    """A span-QA task: where its files are and how its splits are made.

    Attributes:
        name: registry name. files: split -> file relative to the data folder.
        article_split: True for squad2 (the splits are articles of one file; see the module docstring).
        no_answer: whether questions may be unanswerable (predict "" and tune a no-answer threshold).
        note: caveats of the data.
        train_also: other QA tasks whose ``train`` split is added after this task's own train questions.
    """

    name: str
    files: Mapping[str, str]
    article_split: bool
    no_answer: bool
    note: str
    train_also: tuple[str, ...] = ()

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.files)

    def path(self, split: str, data_dir=None) -> Path:
        """The file holding ``split`` under ``data_dir`` (default
        [`settings.data_dir`][structattn.settings.data_dir])."""
        from ..settings import data_dir as default_data_dir

        if split not in self.files:
            raise UserError(f"task {self.name}: unknown split {split!r}; valid splits: {', '.join(self.files)}")
        root = Path(data_dir) if data_dir is not None else default_data_dir()
        return root / self.files[split]

    def titles(self, split: str, dataset, split_file=None) -> list[str]:
        """The article titles of ``split`` (article-split tasks only), in file order."""
        parts = squad2_split(dataset, split_file)
        if split == "test":
            return parts["test"]
        held_out = set(article_split(subset(dataset, parts["train"]), DEV_FRACTION, salt=DEV_SALT)["test"])
        return [t for t in parts["train"] if (t in held_out) == (split == "dev")]

    def read(self, split: str, data_dir=None, split_file=None) -> QASplit:
        """Questions and SQuAD JSON of ``split``; ``split_file`` overrides the committed article split (squad2)."""
        path = self.path(split, data_dir)
        dataset = load_squad(path)
        if self.article_split:
            dataset = subset(dataset, self.titles(split, dataset, split_file))
        if split == "train" and self.train_also:
            dataset = combine(dataset, *(get_qa_task(name).read("train", data_dir).dataset
                                         for name in self.train_also))
        return QASplit(self.name, split, read_squad(dataset), dataset, path)


def combine(*datasets: dict) -> dict:
    """One SQuAD JSON object holding the articles of ``datasets`` in order (version of the first); question ids
    must stay unique (a prediction file is keyed by them)."""
    seen: set[str] = set()
    for dataset in datasets:
        for article in dataset["data"]:
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    if qa["id"] in seen:
                        raise UserError(f"question id {qa['id']!r} occurs in more than one of the combined SQuAD "
                                        "files; ids must be unique to key predictions")
                    seen.add(qa["id"])
    return {**datasets[0], "data": [article for dataset in datasets for article in dataset["data"]]}


SQUAD2 = QATask(
    name="squad2", files={"train": SQUAD2_FILE, "dev": SQUAD2_FILE, "test": SQUAD2_FILE}, article_split=True,
    no_answer=True,
    note="SQuAD 2.0 train is not available: the 2.0 dev file is split by article (structattn/tasks/squad2_split.json); "
         "test scores are not comparable with published SQuAD 2.0 dev scores.")
SQUAD11 = QATask(
    name="squad11", files={"train": SQUAD11_TRAIN_FILE, "dev": SQUAD11_DEV_FILE, "test": SQUAD11_DEV_FILE},
    article_split=False, no_answer=False,
    note="dev and test are both the official dev file (the official test set is hidden); train ids are synthetic.")

SQUAD2_PLUS11 = QATask(
    name="squad2_plus11", files=SQUAD2.files, article_split=True, no_answer=True, train_also=("squad11",),
    note="squad2's dev and test parts; its train part followed by all of SQuAD 1.1 train (87,599 answerable "
         "questions): the 2.0 split alone has 6,305 training questions, too few for a reader to learn from.")

QA_TASKS: dict[str, QATask] = {task.name: task for task in (SQUAD2, SQUAD11, SQUAD2_PLUS11)}


def get_qa_task(name: str) -> QATask:
    """The span-QA task registered as ``name``; an unknown name raises UserError listing the valid ones."""
    return registered(QA_TASKS, name, "QA task", "QA tasks")


# -------------------------------------------------------------------------------------------- alignment
def answer_word_span(spans: Sequence[tuple[int, int]], answer_start: int, text: str,
                     context: str | None = None) -> tuple[int, int] | None:
    """The first and last word (indices into ``spans``) covering the answer's characters
    ``[answer_start, answer_start + len(text))``, or None when it cannot be aligned.

    ``spans`` are the words' ``[start, end)`` character spans in increasing order (as
    `structattn.tasks.text_words.words_with_offsets` gives). An answer starting or ending inside a word
    takes the whole word (``"1066"`` in ``"c.1066"`` covers that word). None when the text is empty, the range
    touches no word (only whitespace, or outside the text), or ``context`` is given and
    ``context[answer_start:answer_start + len(text)] != text``.
    """
    end = answer_start + len(text)
    if not text or answer_start < 0:
        return None
    if context is not None and context[answer_start:end] != text:
        return None
    first = next((i for i, (s, e) in enumerate(spans) if e > answer_start), None)
    if first is None or spans[first][0] >= end:
        return None
    last = first
    while last + 1 < len(spans) and spans[last + 1][0] < end:
        last += 1
    return first, last


# ----------------------------------------------------------------------------------------------- script
def main(argv: list[str] | None = None) -> int:
    """``python -m structattn.tasks.squad --write-split src/structattn/tasks/squad2_split.json [--data FILE]``."""
    from ..settings import data_dir
    from ..io import atomic_write_text

    ap = argparse.ArgumentParser(prog="python -m structattn.tasks.squad",
                                 description="Write the article split of the SQuAD 2.0 file (article_split).")
    ap.add_argument("--write-split", metavar="OUT", required=True, help="JSON file to write")
    ap.add_argument("--data", metavar="FILE", help=f"SQuAD file to split (default: <data>/{SQUAD2_FILE})")
    args = ap.parse_args(argv)
    try:
        dataset = load_squad(args.data or data_dir() / SQUAD2_FILE)
        split = article_split(dataset, TEST_FRACTION)
    except UserError as exc:
        ap.exit(2, f"error: {exc}\n")
    counts = _titles(dataset)
    atomic_write_text(Path(args.write_split), json.dumps(split, indent=1, ensure_ascii=False) + "\n")
    for side in ("train", "test"):
        print(f"{side}: {len(split[side])} articles, {sum(counts[t] for t in split[side])} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
