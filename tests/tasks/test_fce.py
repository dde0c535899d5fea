"""FCE error detection (MultiGED-2023 split): counts and synthetic files."""
from __future__ import annotations

from collections import Counter

import pytest

from structattn.errors import UserError
from structattn.tasks import get_task
from tasks_testutil import needs, write

SPEC = get_task("fce")
D = "fce/multiged2023_bea_split"

# sentences, tokens, i-tokens -- fce/SOURCE.md (train tokens: README says 454,736, the file has 454,730)
COUNTS = {
    "train": (28357, 454730, 42899),
    "dev": (2191, 34748, 3460),
    "test": (2695, 41932, 4501),
}


@needs(f"{D}/en_fce_train.tsv", f"{D}/en_fce_dev.tsv", f"{D}/en_fce_test.reconstructed.tsv")
@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_counts(split):
    sentences, tokens, errors = COUNTS[split]
    examples = SPEC.read(split)
    assert len(examples) == sentences
    tags = Counter(t for e in examples for t in e.label)
    assert sum(tags.values()) == tokens == sum(len(e.words_a) for e in examples)
    assert tags["i"] == errors and set(tags) == {"c", "i"} == set(SPEC.label_list)


@needs(f"{D}/en_fce_dev.tsv")
def test_dev_baselines():
    examples = SPEC.read("dev")
    refs = [e.label for e in examples]
    assert SPEC.metric(refs, refs)["f0.5"] == 1.0
    all_c = SPEC.metric([["c"] * len(r) for r in refs], refs)
    assert all_c["f0.5"] == 0.0 and all_c["accuracy"] == pytest.approx(31288 / 34748)
    all_i = SPEC.metric([["i"] * len(r) for r in refs], refs)
    p = 3460 / 34748
    assert all_i["precision"] == pytest.approx(p) and all_i["recall"] == 1.0
    assert all_i["f0.5"] == pytest.approx(1.25 * p / (0.25 * p + 1))


@needs(f"{D}/en_fce_train.tsv")
def test_first_train_sentence():
    first = SPEC.read("train")[0]
    assert first.words_a[:5] == ["Dear", "Sir", "or", "Madam", ","]
    assert first.guid == f"{D}/en_fce_train.tsv:1"


def test_note_says_not_comparable():
    assert "NOT comparable" in SPEC.note and "2016" in SPEC.note


def test_synthetic(tmp_path):
    write(tmp_path, f"{D}/en_fce_dev.tsv", "I\tc\nhas\ti\n\n\nok\tc\n")
    ex = SPEC.read("dev", data_dir=tmp_path)
    assert [(e.words_a, e.label) for e in ex] == [(["I", "has"], ["c", "i"]), (["ok"], ["c"])]
    assert ex[1].guid.endswith("en_fce_dev.tsv:5")


def test_na_label_is_rejected_with_hint(tmp_path):
    path = write(tmp_path, f"{D}/en_fce_test.reconstructed.tsv", "I\tc\nhas\tNA\n")
    with pytest.raises(UserError, match=rf"{path}:2: unknown label 'NA'.*reconstructed"):
        SPEC.read("test", data_dir=tmp_path)
