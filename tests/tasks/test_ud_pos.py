"""UD English EWT UPOS tagging: counts from stats.xml / SOURCE.md and synthetic CoNLL-U."""
from __future__ import annotations

from collections import Counter

import pytest

from structattn.tasks import get_task
from structattn.tasks.ud_pos import UPOS
from tasks_testutil import needs, write

SPEC = get_task("ud_pos")

COUNTS = {"train": (12544, 204577), "dev": (2001, 25147), "test": (2077, 25094)}


@needs("ud_english_ewt/en_ewt-ud-dev.conllu", "ud_english_ewt/en_ewt-ud-test.conllu")
@pytest.mark.parametrize("split", ["dev", "test"])
def test_counts_dev_test(split):
    sentences, words = COUNTS[split]
    examples = SPEC.read(split)
    assert len(examples) == sentences
    assert sum(len(e.words_a) for e in examples) == words
    assert all(len(e.words_a) == len(e.label) for e in examples)


@needs("ud_english_ewt/en_ewt-ud-train.conllu")
def test_counts_train_and_label_list():
    sentences, words = COUNTS["train"]
    examples = SPEC.read("train")
    assert len(examples) == sentences
    tags = Counter(t for e in examples for t in e.label)
    assert sum(tags.values()) == words
    assert set(tags) == set(UPOS) == set(SPEC.label_list)
    # "_" is a real word form in EWT (5 times in train) and must not become None
    assert sum(w == "_" for e in examples for w in e.words_a) == 5
    refs = [e.label for e in examples[:200]]
    assert SPEC.metric(refs, refs) == {"accuracy": 1.0}


SAMPLE = """# sent_id = s1
# text = I don't know
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tit\t_\t_\t_\t_\t_\t_\t4:obj\t_

1\t_\t_\tPUNCT\t_\t_\t0\troot\t_\t_
"""


def test_synthetic_multiword_and_empty_nodes(tmp_path):
    write(tmp_path, "ud_english_ewt/en_ewt-ud-dev.conllu", SAMPLE)
    ex = SPEC.read("dev", data_dir=tmp_path)
    assert ex[0].words_a == ["I", "do", "n't", "know"]
    assert ex[0].label == ["PRON", "AUX", "PART", "VERB"]
    assert ex[0].guid.endswith("en_ewt-ud-dev.conllu:1")
    assert ex[1].words_a == ["_"] and ex[1].label == ["PUNCT"] and ex[1].guid == "ud_english_ewt/en_ewt-ud-dev.conllu:10"
