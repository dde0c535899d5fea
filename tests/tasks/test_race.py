"""RACE reader: tiny hand-made files (order, ids, labels, bad input) and the real release's counts."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from structattn.errors import UserError
from structattn.tasks.multiple_choice import get_mc_task
from structattn.tasks.race import read_race, read_race_file
from tasks_testutil import DATA, needs, write

OPTS = ["one.", "two.", "three.", "four."]


def passage(article, questions, answers, pid=None, options=None):
    data = {"answers": answers, "options": options or [OPTS] * len(questions), "questions": questions,
            "article": article}
    if pid is not None:
        data["id"] = pid
    return json.dumps(data)


@pytest.fixture
def race(tmp_path):
    root = tmp_path / "race"
    write(root, "train/middle/10.txt", passage("Ten.\nSecond line.", ["Q10?"], ["D"], "middle10.txt"))
    write(root, "train/middle/2.txt", passage("Two.", ["Q2a?", "He went _ ."], ["A", "C"], "middle2.txt"))
    write(root, "train/high/7.txt", passage("Seven.", ["Q7?"], ["B"]))  # no id: level + file name
    return root


def test_read_order_ids_labels(race):
    qs = read_race(race, "train")
    # levels in the order asked, files by number (2 before 10), questions in file order
    assert [q.qid for q in qs] == ["middle2.txt:0", "middle2.txt:1", "middle10.txt:0", "high7.txt:0"]
    assert [q.label for q in qs] == [0, 2, 3, 1]
    assert [q.group for q in qs] == ["middle", "middle", "middle", "high"]
    assert all(q.kind == "" and q.options == OPTS for q in qs)
    assert qs[1].question == "He went _ ." and qs[1].passage == "Two."
    assert qs[2].passage == "Ten.\nSecond line."  # text as released, newline kept


def test_levels_and_limit(race):
    assert [q.qid for q in read_race(race, "train", levels=("high", "middle"), limit=2)] == [
        "high7.txt:0", "middle2.txt:0"]
    assert [q.group for q in read_race(race, "train", levels=("high",))] == ["high"]
    assert [q.qid for q in read_race(race, "train", limit=1)] == ["middle2.txt:0"]  # may stop inside a file
    assert len(read_race(race, "train", limit=3)) == 3
    assert len(read_race(race, "train", limit=0)) == 4


def test_registry_reads_through_data_dir(race):
    qs = get_mc_task("race_h").read("train", data_dir=race.parent)
    assert [q.qid for q in qs] == ["high7.txt:0"]
    assert len(get_mc_task("race").read("train", data_dir=race.parent, limit=1)) == 1


@pytest.mark.parametrize("content, message", [
    ("{not json", r"not a UTF-8 JSON object"),
    (json.dumps({"article": "A.", "questions": ["q"], "options": [OPTS]}), r"key\(s\) answers missing"),
    (passage("A.", ["q1", "q2"], ["A"]), r"2 questions, 2 option lists and 1 answers"),
    (passage("A.", ["q"], ["E"]), r"question 0 \(id high5\.txt:0\): answer 'E' is not one of A, B, C, D"),
    (passage("   ", ["q"], ["A"]), r"'article' is empty"),
    (passage("A.", ["q"], ["A"], options=[["x", "y", "z", " "]]), r"question 0 \(id high5\.txt:0\): options must be a "
                                                                   r"list of 4 non-empty strings"),
    (passage("A.", ["q"], ["A"], options=[["x", "y", "z"]]), r"options must be a list of 4 non-empty strings"),
    (json.dumps([1, 2]), r"expected a JSON object"),
])
def test_bad_file_names_file_and_problem(tmp_path, content, message):
    path = write(tmp_path, "race/dev/high/5.txt", content)
    with pytest.raises(UserError, match=message) as err:
        read_race(tmp_path / "race", "dev", levels=("high",))
    assert str(path) in str(err.value)


def test_bad_arguments_and_layout(tmp_path, race):
    with pytest.raises(UserError, match="unknown RACE split 'validation'"):
        read_race(race, "validation")
    with pytest.raises(UserError, match="levels must be among middle, high"):
        read_race(race, "train", levels=("college",))
    with pytest.raises(UserError, match=r"dev/middle: folder not found"):
        read_race(race, "dev")
    (race / "test" / "middle").mkdir(parents=True)
    with pytest.raises(UserError, match="no .txt passage files"):
        read_race(race, "test", levels=("middle",))
    with pytest.raises(UserError, match="limit must be >= 0"):
        read_race(race, "train", limit=-1)


def test_single_file_reader(race, tmp_path):
    qs = read_race_file(race / "train" / "middle" / "2.txt", "middle")
    assert [(q.qid, q.label) for q in qs] == [("middle2.txt:0", 0), ("middle2.txt:1", 2)]
    # two files of the release have empty question lists: they give no question, and no error
    assert read_race_file(write(tmp_path, "x/3.txt", passage("Text.", [], [])), "high") == []


# ------------------------------------------------------------------------------------- the real data
# SOURCE.md: passages / questions per split and level (equal to the official numbers)
COUNTS = {"train": {"middle": (6409, 25421), "high": (18728, 62445)},
          "dev": {"middle": (368, 1436), "high": (1021, 3451)},
          "test": {"middle": (362, 1436), "high": (1045, 3498)}}


@needs("race/train/middle", "race/dev/high", "race/test/high")
@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_release_counts(split):
    qs = get_mc_task("race").read(split, data_dir=DATA)
    for level, (n_passages, n_questions) in COUNTS[split].items():
        mine = [q for q in qs if q.group == level]
        assert len(mine) == n_questions
        assert len(list((DATA / "race" / split / level).glob("*.txt"))) == n_passages
        # every file has questions except train/high 15946.txt and 16528.txt (empty lists in the release)
        with_questions = len({q.qid.rsplit(":", 1)[0] for q in mine})
        assert with_questions == n_passages - (2 if (split, level) == ("train", "high") else 0)
    assert len({q.qid for q in qs}) == len(qs)
    assert all(len(q.options) == 4 and q.label in range(4) for q in qs)
    if split == "test":  # SOURCE.md: answer distribution of the test split
        assert Counter("ABCD"[q.label] for q in qs) == {"A": 1063, "B": 1323, "C": 1324, "D": 1224}


@needs("race/test/middle/2177.txt")
def test_known_file():
    qs = [q for q in read_race(DATA / "race", "test", levels=("middle",)) if q.qid.startswith("middle2177.txt:")]
    assert len(qs) == 3 and [q.label for q in qs] == [1, 0, 3]
    assert qs[0].question == 'In which country is the prom called a "formal"?'
    assert qs[0].options == ["America.", "Canada.", "Britain.", "Australia."]
    assert get_mc_task("race_m").read("dev", data_dir=DATA, limit=5)[4].group == "middle"
