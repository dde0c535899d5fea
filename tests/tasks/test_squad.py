"""SQuAD reading and checking, article splits, the QA task registry, answer alignment, and the committed split."""
from __future__ import annotations

import copy
import json

import pytest

from structattn.errors import UserError
from structattn.tasks import squad
from structattn.tasks.text_words import words_with_offsets
from tasks_testutil import DATA, needs, write

CONTEXT = "Normandy's rulers (c.1066) fought in the 10th-11th centuries.  Then  peace."


def article(title, questions_per_paragraph, context=CONTEXT):
    """An article whose paragraph k holds questions_per_paragraph[k] answerable questions."""
    return {"title": title, "paragraphs": [
        {"context": context, "qas": [{"id": f"{title}-{p}-{q}", "question": "Who?",
                                      "answers": [{"text": "Normandy", "answer_start": 0}], "is_impossible": False}
                                     for q in range(n)]}
        for p, n in enumerate(questions_per_paragraph)]}


def dataset(*articles):
    return {"version": "v2.0", "data": list(articles)}


SMALL = dataset(
    {"title": "Normans", "paragraphs": [{"context": CONTEXT, "qas": [
        {"id": "a1", "question": "Whose rulers?", "answers": [{"text": "Normandy", "answer_start": 0},
                                                              {"text": "Normandy's", "answer_start": 0}],
         "is_impossible": False},
        {"id": "a2", "question": "Who ate?", "answers": [], "plausible_answers": [], "is_impossible": True}]},
        {"context": "Second paragraph.", "qas": [
            {"id": "a3", "question": "Which?", "answers": [{"text": "Second", "answer_start": 0}]}]}]},
    {"title": "Empty_article", "paragraphs": []},
    {"title": "Rhine", "paragraphs": [{"context": "The Rhine flows.", "qas": [
        {"id": "b1", "question": "What flows?", "answers": [{"text": "Rhine", "answer_start": 4}]}]}]},
)


# -------------------------------------------------------------------------------------------- reading
def test_read_squad_fields_and_paragraph_index(tmp_path):
    path = write(tmp_path, "s.json", json.dumps(SMALL))
    questions = squad.read_squad(path)
    assert [q.qid for q in questions] == ["a1", "a2", "a3", "b1"]
    a1, a2, a3, b1 = questions
    assert (a1.title, a1.question, a1.context) == ("Normans", "Whose rulers?", CONTEXT)
    assert a1.answers == [("Normandy", 0), ("Normandy's", 0)] and not a1.is_impossible
    assert a2.answers == [] and a2.is_impossible
    assert not a3.is_impossible  # no is_impossible key (1.1 style): answerable because it has answers
    # global paragraph index in file order, shared by the questions of one paragraph
    assert [q.paragraph for q in questions] == [0, 0, 1, 2]
    assert squad.read_squad(SMALL) == questions  # a dict works the same


def _broken(mutate):
    data = copy.deepcopy(SMALL)
    mutate(data)
    return data


BAD = [
    (lambda d: d.pop("data"), r'expected a JSON object \{"version": \.\.\., "data": \[articles\]\}'),
    (lambda d: d["data"][2].pop("title"), r"article 2: no string 'title'"),
    (lambda d: d["data"][2].update(paragraphs={}), r"article 2 \('Rhine'\): no 'paragraphs' list"),
    (lambda d: d["data"][0]["paragraphs"][1].pop("context"), r"article 0 \('Normans'\), paragraph 1: no string 'context'"),
    (lambda d: d["data"][0]["paragraphs"][1].pop("qas"), r"paragraph 1: no 'qas' list"),
    (lambda d: d["data"][2]["paragraphs"][0]["qas"][0].update(id=""), r"paragraph 0, question 0: no non-empty string 'id'"),
    (lambda d: d["data"][2]["paragraphs"][0]["qas"][0].update(id="a2"),
     r"article 2 \('Rhine'\), paragraph 0, question 0 \(id 'a2'\): id already used by article 0, paragraph 0, question 1"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("question"), r"question 0 \(id 'a1'\): no string 'question'"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][1].pop("answers"), r"\(id 'a2'\): no 'answers' list"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][1].update(text=3), r"\(id 'a1'\), answer 1: no string 'text'"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start="0"),
     r"answer 0: 'answer_start' must be an integer character offset, got '0'"),
    (lambda d: d["data"][2]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=13),
     r"\(id 'b1'\), answer 0: answer_start 13 \+ 5 characters lies outside the context \(16 characters\)"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][1].update(is_impossible="yes"), r"'is_impossible' must be true or false"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(is_impossible=True),
     r"\(id 'a1'\): is_impossible is true but it has 2 answer\(s\)"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][1].update(is_impossible=False),
     r"\(id 'a2'\): is_impossible is false but it has no answer"),
]


@pytest.mark.parametrize("mutate,pattern", BAD, ids=[f"bad-{i}" for i in range(len(BAD))])
def test_bad_squad_file_names_article_and_question(tmp_path, mutate, pattern):
    path = write(tmp_path, "bad.json", json.dumps(_broken(mutate)))
    with pytest.raises(UserError, match=pattern) as info:
        squad.load_squad(path)
    assert str(info.value).startswith(f"{path}: ")


def test_unreadable_files(tmp_path):
    with pytest.raises(UserError, match=r"file not found"):
        squad.load_squad(tmp_path / "missing.json")
    with pytest.raises(UserError, match=r"bad\.json:2:2: not valid JSON \(Extra data\)"):
        squad.load_squad(write(tmp_path, "bad.json", '{"data": []\n}}'))
    with pytest.raises(UserError, match=r"not valid UTF-8"):
        squad.load_squad(write(tmp_path, "latin.json", b'{"data": [], "v": "caf\xe9"}'))


def test_mismatching_answer_text_and_empty_context_are_rejected_naming_the_question():
    data = _broken(lambda d: d["data"][2]["paragraphs"][0]["qas"][0]["answers"][0].update(text="Rhino"))
    with pytest.raises(UserError, match=r"\(id 'b1'\), answer 0: answer_start 4 does not point at the answer text "
                                        r"'Rhino' \(the context there reads 'Rhine'\)"):
        squad.read_squad(data)
    empty = _broken(lambda d: d["data"][2]["paragraphs"][0].update(context="  \n"))
    with pytest.raises(UserError, match=r"article 2 \('Rhine'\), paragraph 0: the context is empty"):
        squad.read_squad(empty)
    words, spans = words_with_offsets("The Rhine flows")
    assert squad.answer_word_span(spans, 4, "Rhino", "The Rhine flows") is None  # alignment double-checks


# ---------------------------------------------------------------------------------------------- splits
def many_articles():
    # 12 articles with 1..12 questions: 78 in all
    return dataset(*(article(f"Title_{k}", [k]) for k in range(1, 13)))


def _questions(data, titles):
    return sum(len(p["qas"]) for a in data["data"] if a["title"] in titles for p in a["paragraphs"])


@pytest.mark.parametrize("fraction", [0.1, 1 / 3, 0.5, 0.9])
def test_article_split_covers_at_least_the_fraction(fraction):
    data = many_articles()
    split = squad.article_split(data, fraction)
    titles = [a["title"] for a in data["data"]]
    assert not set(split["train"]) & set(split["test"])
    assert sorted(split["train"] + split["test"]) == sorted(titles)
    # each side in file order
    assert split["test"] == [t for t in titles if t in split["test"]]
    assert split["train"] == [t for t in titles if t in split["train"]]
    test_q = _questions(data, split["test"])
    assert test_q >= fraction * 78
    # minimal in the hash order: without the last article taken, test would fall short
    order = sorted(split["test"], key=lambda t: squad._stable_key(t, ""))
    assert test_q - _questions(data, [order[-1]]) < fraction * 78


def test_article_split_is_deterministic_from_titles_alone():
    data = many_articles()
    split = squad.article_split(data)
    assert squad.article_split(copy.deepcopy(data)) == split
    # the same articles in the reverse file order: the same sides, each listed in the new file order
    reverse = squad.article_split(dataset(*reversed(data["data"])))
    assert reverse == {side: titles[::-1] for side, titles in split.items()}
    # the test side is a prefix of the sha256 order, whatever the question counts
    order = sorted((a["title"] for a in data["data"]), key=lambda t: squad._stable_key(t, ""))
    recounted = dataset(*(article(t, [13 - int(t.split("_")[1])]) for t in reversed(order)))
    for result in (split, squad.article_split(recounted)):
        assert [t for t in order if t in result["test"]] == order[:len(result["test"])]
    assert squad.article_split(data, salt="dev:") != split  # the salt gives another order


def test_article_split_errors():
    with pytest.raises(UserError, match=r"strictly between 0 and 1"):
        squad.article_split(many_articles(), 1.0)
    with pytest.raises(UserError, match=r"at least 2 articles"):
        squad.article_split(dataset(article("Only", [3])))
    # one huge article first in the hash order would take everything: refused
    big = dataset(article("A", [50]), article("B", [1]))
    first = min(["A", "B"], key=lambda t: squad._stable_key(t, ""))
    with pytest.raises(UserError, match=r"leaves no article for train"):
        squad.article_split(big, 0.99 if first == "A" else 0.999)


def test_subset_keeps_file_order_and_validity():
    out = squad.subset(SMALL, ["Rhine", "Normans"])
    assert out["version"] == "v2.0" and [a["title"] for a in out["data"]] == ["Normans", "Rhine"]
    squad.validate_squad(out)
    assert [q.qid for q in squad.read_squad(out)] == ["a1", "a2", "a3", "b1"]
    assert squad.subset(SMALL, []) == {"version": "v2.0", "data": []}
    with pytest.raises(UserError, match=r"1 title\(s\) not in the dataset: 'Seine'"):
        squad.subset(SMALL, ["Rhine", "Seine"])


@pytest.mark.parametrize("split,pattern", [
    ({"train": ["Normans"]}, r'expected \{"train": \[titles\], "test": \[titles\]\}'),
    ({"train": ["Normans", "Rhine"], "test": ["Rhine", "Empty_article"]}, r"1 title\(s\) on both sides \('Rhine'\)"),
    ({"train": ["Normans", "Normans"], "test": ["Rhine", "Empty_article"]}, r"a title listed twice"),
    ({"train": ["Normans", "Seine"], "test": ["Rhine", "Empty_article"]}, r"1 title\(s\) not in the data \('Seine'\)"),
    ({"train": ["Normans"], "test": ["Rhine"]}, r"1 title\(s\) of the data on neither side \('Empty_article'\)"),
])
def test_bad_split_file(tmp_path, split, pattern):
    path = write(tmp_path, "split.json", json.dumps(split))
    with pytest.raises(UserError, match=pattern) as info:
        squad.squad2_split(SMALL, path)
    assert str(info.value).startswith(str(path)) and "--write-split" in str(info.value)
    with pytest.raises(UserError, match=r"split file not found"):
        squad.squad2_split(SMALL, tmp_path / "none.json")


# ---------------------------------------------------------------------------------------------- registry
def test_registry_names():
    assert set(squad.QA_TASKS) == {"squad2", "squad11", "squad2_plus11"}
    assert squad.get_qa_task("squad2").no_answer and not squad.get_qa_task("squad11").no_answer
    with pytest.raises(UserError, match=r"unknown QA task 'squad3'; valid QA tasks: squad11, squad2, squad2_plus11"):
        squad.get_qa_task("squad3")
    with pytest.raises(UserError, match=r"unknown split 'valid'; valid splits: train, dev, test"):
        squad.get_qa_task("squad11").path("valid", "/nowhere")


def test_squad2_splits_from_a_split_file(tmp_path):
    data = many_articles()
    write(tmp_path, squad.SQUAD2_FILE, json.dumps(data))
    split_file = write(tmp_path, "split.json", json.dumps(squad.article_split(data)))
    task = squad.get_qa_task("squad2")
    parts = {s: task.read(s, tmp_path, split_file=split_file) for s in ("train", "dev", "test")}
    titles = {s: [a["title"] for a in parts[s].dataset["data"]] for s in parts}
    assert titles["test"] == squad.article_split(data)["test"]
    # dev: the salted split of the train part; train + dev = the train part, disjoint
    train_part = squad.article_split(data)["train"]
    assert titles["dev"] == squad.article_split(squad.subset(data, train_part), squad.DEV_FRACTION, salt="dev:")["test"]
    assert sorted(titles["train"] + titles["dev"]) == sorted(train_part) and not set(titles["train"]) & set(titles["dev"])
    assert _questions(data, titles["dev"]) >= 0.15 * _questions(data, train_part)
    for s, part in parts.items():
        assert (part.task, part.split, part.source) == ("squad2", s, tmp_path / squad.SQUAD2_FILE)
        assert [q.qid for q in part.questions] == [q.qid for q in squad.read_squad(part.dataset)]
        squad.validate_squad(part.dataset)


def test_squad2_split_computed_when_no_file_is_found(tmp_path, monkeypatch):
    data = many_articles()
    write(tmp_path, squad.SQUAD2_FILE, json.dumps(data))
    monkeypatch.setattr(squad, "_default_split_file", lambda: None)  # as in an install without the repository
    test = squad.get_qa_task("squad2").read("test", tmp_path)
    assert [a["title"] for a in test.dataset["data"]] == squad.article_split(data)["test"]


def test_squad11_splits(tmp_path):
    write(tmp_path, squad.SQUAD11_TRAIN_FILE, json.dumps(dataset(article("T", [2]))))
    write(tmp_path, squad.SQUAD11_DEV_FILE, json.dumps(dataset(article("D", [1, 2]))))
    task = squad.get_qa_task("squad11")
    train, dev, test = (task.read(s, tmp_path) for s in ("train", "dev", "test"))
    assert [q.qid for q in train.questions] == ["T-0-0", "T-0-1"]
    assert [q.qid for q in dev.questions] == ["D-0-0", "D-1-0", "D-1-1"] and [q.paragraph for q in dev.questions] == [0, 1, 1]
    assert test.dataset == dev.dataset and test.source == dev.source


def test_squad2_plus11_trains_on_both_and_evaluates_on_the_squad2_parts(tmp_path):
    data = many_articles()
    write(tmp_path, squad.SQUAD2_FILE, json.dumps(data))
    split_file = write(tmp_path, "split.json", json.dumps(squad.article_split(data)))
    write(tmp_path, squad.SQUAD11_TRAIN_FILE, json.dumps(dataset(article("Eleven", [2, 1]))))
    plus, two = squad.get_qa_task("squad2_plus11"), squad.get_qa_task("squad2")
    train = plus.read("train", tmp_path, split_file=split_file)
    own = two.read("train", tmp_path, split_file=split_file)
    assert [q.qid for q in train.questions] == [q.qid for q in own.questions] + ["Eleven-0-0", "Eleven-0-1",
                                                                                 "Eleven-1-0"]
    assert train.questions[-1].paragraph == own.questions[-1].paragraph + 2   # paragraph indices stay distinct
    squad.validate_squad(train.dataset)
    for split in ("dev", "test"):
        assert plus.read(split, tmp_path, split_file=split_file).dataset == two.read(split, tmp_path,
                                                                                      split_file=split_file).dataset


def test_combined_files_must_not_share_question_ids():
    data = dataset(article("T", [1]))
    with pytest.raises(UserError, match=r"question id 'T-0-0' occurs in more than one of the combined SQuAD files"):
        squad.combine(data, copy.deepcopy(data))


def test_missing_data_file_says_where(tmp_path):
    with pytest.raises(UserError, match=r"squad11/train-v1\.1.*file not found"):
        squad.get_qa_task("squad11").read("train", tmp_path)


# ---------------------------------------------------------------------------------------------- alignment
def test_answer_word_span():
    words, spans = words_with_offsets(CONTEXT)
    # words: Normandy 's rulers ( c.1066 ) fought in the 10th-11th centuries . Then peace .
    assert squad.answer_word_span(spans, 0, "Normandy") == (0, 0)
    assert squad.answer_word_span(spans, 0, "Normandy's rulers", CONTEXT) == (0, 2)
    assert squad.answer_word_span(spans, 21, "1066") == (4, 4)  # inside "c.1066": the whole word
    assert squad.answer_word_span(spans, 41, "10th-11th centuries.") == (9, 11)
    assert squad.answer_word_span(spans, 60, ".  Then", CONTEXT) == (11, 12)  # whitespace inside is fine
    assert squad.answer_word_span(spans, 61, "  ") is None  # only whitespace: no word
    assert squad.answer_word_span(spans, 0, "") is None
    assert squad.answer_word_span(spans, 80, "x") is None  # after the last word
    assert squad.answer_word_span(spans, 0, "Normandx", CONTEXT) is None  # text is not at answer_start
    assert squad.answer_word_span([], 0, "x") is None


# ------------------------------------------------------------------------------------------- write-split
def test_write_split_script(tmp_path, capsys):
    data = many_articles()
    source = write(tmp_path, "d.json", json.dumps(data))
    out = tmp_path / "results" / "split.json"
    assert squad.main(["--write-split", str(out), "--data", str(source)]) == 0
    assert json.loads(out.read_text()) == squad.article_split(data)
    assert "test: " in capsys.readouterr().out


# --------------------------------------------------------------------------------------------- real data
@needs(squad.SQUAD2_FILE)
def test_committed_squad2_split_equals_article_split():
    data = squad.load_squad(DATA / squad.SQUAD2_FILE)
    committed = json.loads(squad._default_split_file().read_text(encoding="utf-8"))
    assert committed == squad.article_split(data, 1 / 3)
    assert not set(committed["train"]) & set(committed["test"])
    assert len(committed["train"]) + len(committed["test"]) == 35
    total, test = _questions(data, committed["train"] + committed["test"]), _questions(data, committed["test"])
    assert total == 11873 and 3 * test >= total


@needs(squad.SQUAD2_FILE)
def test_squad2_task_on_the_real_file():
    task = squad.get_qa_task("squad2")
    parts = {s: task.read(s) for s in ("train", "dev", "test")}
    counts = {s: len(p.questions) for s, p in parts.items()}
    assert sum(counts.values()) == 11873
    ids = [set(q.qid for q in p.questions) for p in parts.values()]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert 0.15 <= counts["dev"] / (counts["train"] + counts["dev"]) < 0.25  # whole articles: about 15 %
    assert sum(q.is_impossible for p in parts.values() for q in p.questions) == 5945


@needs(squad.SQUAD2_FILE, squad.SQUAD11_TRAIN_FILE)
def test_squad2_plus11_on_the_real_files():
    train = squad.get_qa_task("squad2_plus11").read("train")
    assert len(train.questions) == 6305 + 87599 and sum(q.is_impossible for q in train.questions) == 3021
    assert len({q.qid for q in train.questions}) == len(train.questions)


@needs(squad.SQUAD11_TRAIN_FILE, squad.SQUAD11_DEV_FILE)
def test_squad11_task_on_the_real_files():
    task = squad.get_qa_task("squad11")
    dev = task.read("dev")
    assert len(dev.questions) == 10570 and len(dev.dataset["data"]) == 48
    assert not any(q.is_impossible for q in dev.questions)
    assert sum(len(q.answers) for q in dev.questions) == 34726
    train = task.read("train")
    assert len(train.questions) == 87599 and train.questions[0].answers == [("Saint Bernadette Soubirous", 515)]
    assert train.questions[-1].paragraph == 18895  # 18,896 paragraphs
