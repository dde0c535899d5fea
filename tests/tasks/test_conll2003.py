"""CoNLL-2003 reader: official counts (skipped without the data) and synthetic files."""
from __future__ import annotations

from collections import Counter

import pytest

from structattn.errors import UserError
from structattn.tasks import get_task
from structattn.tasks.metrics import chunks_strict_iob2
from tasks_testutil import needs, write

SPEC = get_task("conll2003")

# sentences (DOCSTART excluded), tokens, entities by type -- conll2003/SOURCE.md = official statistics
OFFICIAL = {
    "train": (14041, 203621, {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600}),
    "dev": (3250, 51362, {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}),
    "test": (3453, 46435, {"LOC": 1668, "MISC": 702, "ORG": 1661, "PER": 1617}),
}


@needs("conll2003/train.txt", "conll2003/valid.txt", "conll2003/test.txt")
@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_official_counts(split):
    sentences, tokens, entities = OFFICIAL[split]
    examples = SPEC.read(split)
    assert len(examples) == sentences
    assert sum(len(e.words_a) for e in examples) == tokens
    assert all(len(e.words_a) == len(e.label) and e.words_b is None for e in examples)
    assert not any(w == "-DOCSTART-" for e in examples for w in e.words_a)
    found = Counter(kind for e in examples for kind, _, _ in chunks_strict_iob2(e.label))
    assert found == entities
    if split == "train":
        # the label list holds exactly the tags seen in train
        assert {t for e in examples for t in e.label} == set(SPEC.label_list)
    refs = [e.label for e in examples[:500]]
    out = SPEC.metric(refs, refs)
    assert out["f1"] == 1.0 and out["conlleval_f1"] == 1.0


@needs("conll2003/train.txt")
def test_first_sentence():
    first = SPEC.read("train")[0]
    assert first.words_a == ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]
    assert first.label == ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]
    assert first.guid == "conll2003/train.txt:3"


def test_synthetic_docstart_and_blank_lines(tmp_path):
    text = ("-DOCSTART- -X- -X- O\n\n"
            "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\n\n"
            "-DOCSTART- -X- -X- O\n"
            "in IN B-PP O\nParis NNP B-NP B-LOC\n")
    write(tmp_path, "conll2003/valid.txt", text)
    ex = SPEC.read("dev", data_dir=tmp_path)
    assert [e.words_a for e in ex] == [["Peter", "Blackburn"], ["in", "Paris"]]
    assert [e.label for e in ex] == [["B-PER", "I-PER"], ["O", "B-LOC"]]
    assert ex[1].guid.endswith("valid.txt:8")


def test_iob1_file_is_rejected(tmp_path):
    # IOB1 (the original 2003 release) starts entities with I-: strict IOB2 scoring would drop them
    path = write(tmp_path, "conll2003/train.txt", "Peter NNP B-NP I-PER\nsaid VBD B-VP O\n")
    with pytest.raises(UserError, match=rf"{path}:1: tag I-PER does not continue an entity.*IOB2"):
        SPEC.read("train", data_dir=tmp_path)
    path = write(tmp_path, "conll2003/train.txt", "Peter NNP B-NP B-PER\nParis NNP I-NP I-LOC\n")
    with pytest.raises(UserError, match=rf"{path}:2: tag I-LOC does not continue"):
        SPEC.read("train", data_dir=tmp_path)
