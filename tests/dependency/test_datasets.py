"""Dataset registry: word lists per split, gold trees, and clear errors."""
from __future__ import annotations

import pytest

from structattn import settings
from structattn.errors import UserError
from structattn.dependency.datasets import dataset_names, dataset_parses, dataset_segments, dataset_sentences, is_gold, split_path

DATA = settings.data_dir_candidate()  # may not exist: the tests that need it skip


def needs(relative: str):
    path = DATA / relative
    return pytest.mark.skipif(not path.exists(), reason=f"{path} not found (set STRUCTATTN_DATA to the shared data folder)")


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(UserError, match="unknown dataset 'nope'.*cola.*conll2003.*ptb_dep.*sst2.*ud_english_ewt"):
        dataset_sentences("nope", "train")


def test_unknown_split_lists_valid_splits():
    with pytest.raises(UserError, match="unknown split 'bogus'; valid splits: train, dev, test"):
        dataset_sentences("sst2", "bogus")


def test_missing_file_says_where_and_mentions_env(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_DATA", str(tmp_path))
    with pytest.raises(UserError) as info:
        dataset_sentences("sst2", "train")
    msg = str(info.value)
    assert str(tmp_path / "sst2" / "train.tsv") in msg and "STRUCTATTN_DATA" in msg


def test_gold_only_for_gold_datasets():
    with pytest.raises(UserError, match="no gold trees.*ptb_dep.*ud_english_ewt"):
        dataset_parses("sst2", "dev")


def test_readers_on_small_files(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_DATA", str(tmp_path))
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\nit 's  good . \t1\nbad\t0\n", encoding="utf-8")
    (tmp_path / "sst2" / "test.tsv").write_text("index\tsentence\n0\tok then .\n", encoding="utf-8")
    assert dataset_sentences("sst2", "dev") == [["it", "'s", "good", "."], ["bad"]]
    assert dataset_sentences("sst2", "validation") == [["it", "'s", "good", "."], ["bad"]]
    assert dataset_sentences("sst2", "test") == [["ok", "then", "."]]

    # CoLA: the words are the task reader's (whitespace split, as the SLA paper parses them)
    (tmp_path / "cola").mkdir()
    (tmp_path / "cola" / "train.tsv").write_text("gj04\t1\t\tOur friends won't buy it.\nx\t0\t*\tU.S. troops, left.", encoding="utf-8")
    assert dataset_sentences("cola", "train") == [["Our", "friends", "won't", "buy", "it."],
                                                  ["U.S.", "troops,", "left."]]

    (tmp_path / "conll2003").mkdir()
    (tmp_path / "conll2003" / "valid.txt").write_text(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n", encoding="utf-8")
    assert dataset_sentences("conll2003", "valid") == [["EU", "rejects"], ["Peter"]]


def test_registry_covers_tasks_and_treebanks():
    from structattn.tasks import TASKS

    assert set(dataset_names()) == set(TASKS) | {"ud_english_ewt", "ptb_dep"}
    assert is_gold("ptb_dep") and not is_gold("sst2")


@needs("glue_other/MRPC")
def test_pairs_give_two_segments_matching_the_task_reader():
    from structattn.tasks import get_task

    first, second = dataset_segments("mrpc", "dev")
    examples = get_task("mrpc").read("dev")
    assert first == [e.words_a for e in examples] and second == [e.words_b for e in examples]


@needs("sst2/train.tsv")
def test_sst2_counts():
    train = dataset_sentences("sst2", "train")
    assert len(train) == 67349 and train[0] == "hide new secretions from the parental units".split()
    assert len(dataset_sentences("sst2", "dev")) == 872
    assert len(dataset_sentences("sst2", "test")) == 1821


@needs("cola/dev.tsv")
def test_cola_counts():
    dev = dataset_sentences("cola", "dev")
    assert len(dev) == 1043 and dev[0] == ["The", "sailors", "rode", "the", "breeze", "clear", "of", "the", "rocks."]
    assert len(dataset_sentences("cola", "test")) == 1063


@needs("conll2003/train.txt")
def test_conll2003_counts():
    for split, n_sent, n_tok in [("train", 14041, 203621), ("dev", 3250, 51362), ("test", 3453, 46435)]:
        sentences = dataset_sentences("conll2003", split)
        assert (len(sentences), sum(map(len, sentences))) == (n_sent, n_tok)


@needs("ud_english_ewt/en_ewt-ud-dev.conllu")
def test_ud_gold_and_words_agree():
    parses = dataset_parses("ud_english_ewt", "dev")
    assert len(parses) == 2001
    assert dataset_sentences("ud_english_ewt", "dev") == [list(p.words) for p in parses]


@needs("ptb_sample_nltk/dependency_treebank")
def test_ptb_dep():
    assert len(dataset_sentences("ptb_dep", "all")) == 3914
    assert split_path("ptb_dep", "all").is_dir()
