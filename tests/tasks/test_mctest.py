"""MCTest reader: escapes, prefixes, answers, bad lines (tiny files), and the release's counts."""
from __future__ import annotations

import logging
from collections import Counter

import pytest

from structattn.errors import UserError
from structattn.tasks.mctest import read_mctest, read_mctest_files, split_prefix, unescape
from structattn.tasks.multiple_choice import get_mc_task
from tasks_testutil import DATA, needs, write


def story_line(story_id, story, questions):
    fields = [story_id, "Author: 1;Work Time(s): 2", story]
    for q, opts in questions:
        fields += [q, *opts]
    return "\t".join(fields)


Q4 = [("one: Who came?", ["Lion", "Tiger", "Snake", "Bear"]),
      ("multiple: What did they eat?", ["cake", "pie", "fish", "nothing"]),
      ("one: Where?", ["home", "park", "school", "zoo"]),
      ("What day?", ["Monday", "Friday", "Sunday", "today"])]


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "mctest"
    write(root, "mc160.dev.tsv", story_line("mc160.dev.0", "It was late.\\newline\\tabThe end.", Q4) + "\n"
          + story_line("mc160.dev.1", "Short.", Q4) + "\n")
    write(root, "mc160.dev.ans", "A\tC\tB\tD\nB\tB\tA\tC\n")
    return root


def test_read_fields(folder):
    qs = read_mctest(folder, "mc160", "dev")
    assert len(qs) == 8
    first = qs[0]
    assert first.qid == "mc160.dev.0:0" and first.group == "mc160"
    assert first.passage == "It was late.\n\tThe end."  # escapes turned back into characters
    assert (first.question, first.kind, first.label) == ("Who came?", "one", 0)
    assert first.options == ["Lion", "Tiger", "Snake", "Bear"]
    assert [(q.kind, q.label) for q in qs[1:4]] == [("multiple", 2), ("one", 1), ("", 3)]
    assert qs[1].question == "What did they eat?"
    assert [q.qid for q in qs[4:]] == [f"mc160.dev.1:{k}" for k in range(4)]
    assert [q.label for q in qs[4:]] == [1, 1, 0, 2]
    # registry: mctest160 reads the same files; a limit keeps the first questions
    assert get_mc_task("mctest160").read("dev", data_dir=folder.parent, limit=3) == qs[:3]


def test_helpers():
    assert unescape("a\\newlineb\\tabc") == "a\nb\tc"
    assert split_prefix("multiple:  Why?") == ("multiple", "Why?")
    assert split_prefix("one:What?") == ("one", "What?")
    assert split_prefix("Who is one: here?") == ("", "Who is one: here?")


def test_missing_answers_give_unlabelled_questions(folder, caplog):
    (folder / "mc160.dev.ans").unlink()
    with caplog.at_level(logging.WARNING, logger="structattn.tasks.mctest"):
        qs = read_mctest(folder, "mc160", "dev")
    assert len(qs) == 8 and all(q.label is None for q in qs)
    assert "unlabelled" in caplog.text


@pytest.mark.parametrize("tsv, ans, where, message", [
    (story_line("s0", "Story.", Q4[:3]) + "\tone: extra?\tx\n", "A\tA\tA\n", "tsv:1",
     r"20 tab-separated fields; expected id, properties, story"),
    (story_line("s0", "Story.", Q4) + "\n", "A\tA\tA\tA\nB\tB\tB\tB\n", "ans",
     r"2 lines for the 1 stories"),
    (story_line("s0", "Story.", Q4) + "\n", "A\tA\tA\n", "ans:1", r"3 answers for the 4 questions"),
    (story_line("s0", "Story.", Q4) + "\n", "A\tA\tE\tA\n", "ans:1",
     r"question 3: answer 'E' is not one of A, B, C, D"),
    (story_line("s0", "  ", Q4) + "\n", "A\tA\tA\tA\n", "tsv:1", r"the story id or the story is empty"),
    (story_line("s0", "S.", [("one: ", ["a", "b", "c", "d"])]) + "\n", "A\n", "tsv:1", r"question 1 or one of"),
])
def test_bad_lines_name_file_and_line(tmp_path, tsv, ans, where, message):
    tsv_path = write(tmp_path, "mc500.train.tsv", tsv)
    ans_path = write(tmp_path, "mc500.train.ans", ans)
    with pytest.raises(UserError, match=message) as err:
        read_mctest_files(tsv_path, ans_path, "mc500")
    kind, _, line = where.partition(":")
    expected = str(ans_path if kind == "ans" else tsv_path) + (f":{line}:" if line else ":")
    assert expected in str(err.value)


def test_bad_arguments(folder):
    with pytest.raises(UserError, match="unknown MCTest set 'mc200'"):
        read_mctest(folder, "mc200", "dev")
    with pytest.raises(UserError, match="unknown MCTest split 'val'"):
        read_mctest(folder, "mc160", "val")
    with pytest.raises(UserError, match="mc160.train.tsv: file not found"):
        read_mctest(folder, "mc160", "train")


# ------------------------------------------------------------------------------------- the real data
# SOURCE.md: stories / questions (4 per story)
COUNTS = {"mctest160": {"train": 70, "dev": 30, "test": 60}, "mctest500": {"train": 300, "dev": 50, "test": 150}}


@needs("mctest/mc160.train.tsv", "mctest/mc500.test.ans")
@pytest.mark.parametrize("task", ["mctest160", "mctest500"])
def test_release_counts(task):
    for split, stories in COUNTS[task].items():
        qs = get_mc_task(task).read(split, data_dir=DATA)
        assert len(qs) == 4 * stories
        assert len({q.qid.rsplit(":", 1)[0] for q in qs}) == stories
        assert all(len(q.options) == 4 and q.label in range(4) for q in qs)
        # README: every question carries a one: / multiple: prefix, and the escapes are gone
        assert set(Counter(q.kind for q in qs)) == {"one", "multiple"}
        assert not any("\\newline" in q.passage or "\\tab" in q.passage for q in qs)
        assert not any(q.question.startswith(("one:", "multiple:")) for q in qs)


@needs("mctest/mc160.dev.tsv", "mctest/mc160.dev.ans")
def test_known_story():
    qs = read_mctest(DATA / "mctest", "mc160", "dev")
    assert qs[0].passage.startswith("It was Jessie Bear's birthday. She was having a party.  She asked her two best "
                                    "friends to\ncome to the party.")
    assert [(q.kind, q.label) for q in qs[:4]] == [("one", 0), ("multiple", 2), ("multiple", 1), ("one", 1)]
    assert qs[2].options[1] == "made cake and hung balloons."
