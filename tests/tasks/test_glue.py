"""GLUE readers: real-file counts (skipped without the data) and small synthetic files."""
from __future__ import annotations

from collections import Counter

import pytest

from structattn.errors import UserError
from structattn.tasks import TASKS, get_task
from tasks_testutil import DATA, needs, write

# (task, split, rows, label counts by label name or None) -- numbers from each folder's SOURCE.md
COUNTS = [
    ("sst2", "train", 67349, {"1": 37569, "0": 29780}),
    ("sst2", "dev", 872, {"1": 444, "0": 428}),
    ("sst2", "test", 1821, None),
    ("cola", "train", 8551, {"0": 2528, "1": 6023}),
    ("cola", "dev", 1043, {"0": 322, "1": 721}),
    ("cola", "test", 1063, None),
    ("mrpc", "train", 3668, {"1": 2474, "0": 1194}),
    ("mrpc", "dev", 408, {"1": 279, "0": 129}),
    ("mrpc", "test", 1725, None),
    ("rte", "train", 2490, {"entailment": 1249, "not_entailment": 1241}),
    ("rte", "dev", 277, {"entailment": 146, "not_entailment": 131}),
    ("rte", "test", 3000, None),
    ("stsb", "train", 5749, None),
    ("stsb", "dev", 1500, None),
    ("stsb", "test", 1379, None),
    ("qnli", "dev", 5463, {"entailment": 2702, "not_entailment": 2761}),
    ("qnli", "test", 5463, None),
    ("wnli", "train", 635, None),
    ("wnli", "dev", 71, {"0": 40, "1": 31}),
    ("wnli", "test", 146, None),
]


@pytest.mark.parametrize("task,split,rows,labels", COUNTS, ids=[f"{t}-{s}" for t, s, _, _ in COUNTS])
def test_real_counts(task, split, rows, labels):
    spec = get_task(task)
    if not (DATA / spec.splits[split]).exists():
        pytest.skip(f"data not found: {DATA / spec.splits[split]} (set STRUCTATTN_DATA to the shared data folder)")
    examples = spec.read(split)
    assert len(examples) == rows
    assert len({e.guid for e in examples}) == rows
    assert all(e.words_a for e in examples)
    assert all((e.words_b is not None) == spec.pair for e in examples)
    if spec.pair:
        assert all(e.words_b for e in examples)
    if split == "test":
        assert all(e.label is None for e in examples) and not spec.has_labels("test")
        return
    if spec.kind == "regression":
        assert all(isinstance(e.label, float) and 0.0 <= e.label <= 5.0 for e in examples)
    else:
        assert all(isinstance(e.label, int) for e in examples)
    if labels is not None:
        assert Counter(spec.label_list[e.label] for e in examples) == labels
    # a perfect prediction gets the best score of the main metric
    refs = [e.label for e in examples]
    assert spec.metric(refs, refs)[spec.main_metric] == pytest.approx(1.0)


@needs("glue_other/MRPC/dev.tsv")
def test_mrpc_quotes_are_plain_characters():
    # dev line 2, second sentence starts with a double quote: QUOTE_NONE keeps it as a word
    ex = get_task("mrpc").read("dev")[0]
    assert ex.guid == "glue_other/MRPC/dev.tsv:2"
    assert ex.words_b[:3] == ['"', "The", "foodservice"]
    assert ex.label == 1


@needs("sst2/train.tsv", "cola/train.tsv", "glue_other/STS-B/dev.tsv")
def test_first_examples():
    sst = get_task("sst2").read("train")[0]
    assert sst.words_a == "hide new secretions from the parental units".split() and sst.label == 0
    cola = get_task("cola").read("train")[0]
    assert cola.guid == "cola/train.tsv:1"  # no header line
    assert cola.words_a[-2:] == ["we", "propose."] and cola.label == 1
    sts = get_task("stsb").read("dev")[0]
    assert sts.label == 5.0 and sts.words_b is not None


def test_qnli_train_is_unavailable():
    spec = get_task("qnli")
    with pytest.raises(UserError, match="not available here.*QNLI train"):
        spec.read("train")
    assert "train" not in spec.splits and "NOT available" in spec.note


def test_registry_and_unknown_names():
    assert {"sst2", "cola", "mrpc", "stsb", "rte", "qnli", "conll2003", "fce", "ud_pos"} <= set(TASKS)
    with pytest.raises(UserError, match="unknown task 'sst-3'.*valid tasks: .*cola.*sst2"):
        get_task("sst-3")
    with pytest.raises(UserError, match="unknown split 'validation'.*train, dev, test"):
        get_task("sst2").read("validation")
    for spec in TASKS.values():
        assert spec.note
        assert spec.kind in ("classification", "regression", "tagging")
        assert spec.metric_fn is not None and spec.main_metric


# ------------------------------------------------------------------ synthetic files (always run)

def test_synthetic_sst2_and_label_order(tmp_path):
    write(tmp_path, "sst2/train.tsv", "sentence\tlabel\na  good   film \t1\nbad\t0\n")
    ex = get_task("sst2").read("train", data_dir=tmp_path)
    assert [e.words_a for e in ex] == [["a", "good", "film"], ["bad"]]
    assert [e.label for e in ex] == [1, 0]
    assert ex[0].guid.endswith("train.tsv:2")


def test_synthetic_columns_found_by_name_and_test_without_labels(tmp_path):
    write(tmp_path, "glue_other/RTE/dev.tsv", "label\tsentence2\tsentence1\tindex\nnot_entailment\tB b\tA a\t0\n")
    write(tmp_path, "glue_other/RTE/test.tsv", "index\tsentence1\tsentence2\n0\tx\ty z\n")
    spec = get_task("rte")
    dev = spec.read("dev", data_dir=tmp_path)[0]
    assert (dev.words_a, dev.words_b, dev.label) == (["A", "a"], ["B", "b"], 1)
    test = spec.read("test", data_dir=tmp_path)[0]
    assert (test.words_a, test.words_b, test.label) == (["x"], ["y", "z"], None)


def test_synthetic_mrpc_bom_quotes_and_crlf(tmp_path):
    text = '\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n1\t1\t2\t" He said "\tHe "said" so\r\n'
    write(tmp_path, "glue_other/MRPC/train.tsv", text)
    ex = get_task("mrpc").read("train", data_dir=tmp_path)
    assert ex[0].words_a == ['"', "He", "said", '"'] and ex[0].words_b == ["He", '"said"', "so"]


def test_synthetic_stsb_scores(tmp_path):
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    write(tmp_path, "glue_other/STS-B/train.tsv", head + "0\tg\tf\t2012\t1\tnone\tnone\tA b.\tA c.\t3.800\n")
    ex = get_task("stsb").read("train", data_dir=tmp_path)
    assert ex[0].label == pytest.approx(3.8) and ex[0].words_a == ["A", "b."]


def test_synthetic_cola_headerless(tmp_path):
    write(tmp_path, "cola/dev.tsv", "gj04\t1\t\tThe cat sat.\nsk\t0\t*\tCat the sat.")  # no final newline
    ex = get_task("cola").read("dev", data_dir=tmp_path)
    assert [e.label for e in ex] == [1, 0] and ex[1].guid.endswith("dev.tsv:2")
    assert get_task("cola").metric([1, 0], [1, 0]) == {"mcc": 1.0, "accuracy": 1.0}


def test_line_separators_inside_text_are_not_line_breaks(tmp_path):
    # \x85 and \u2028 are line breaks for str.splitlines but ordinary characters in GLUE rows
    write(tmp_path, "sst2/dev.tsv", "sentence\tlabel\na\x85b c\u2028d\t1\n")
    ex = get_task("sst2").read("dev", data_dir=tmp_path)
    assert len(ex) == 1 and ex[0].label == 1
