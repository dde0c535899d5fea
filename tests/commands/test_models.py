"""``structattn models`` and ``--model NAME`` on the command line: the shipped models listed with what they were
trained on, their test score and size; parse by name; the errors for a name that is unknown or not shipped."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from structattn.cli import main
from structattn.models import trained
from structattn.bna.model import ChartParser
from structattn.models.trained import TRAINED, shipped_models

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bna"))
from tiny_parser import needs_pipeline  # noqa: E402

torch.set_num_threads(1)


def test_models_lists_each_shipped_model_with_data_score_and_size(capsys):
    assert main(["models"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "TRAINED", "ON", "TEST", "SCORE", "SIZE"]
    assert len(lines) == 1 + len(shipped_models()) and shipped_models()
    for model, line in zip(shipped_models(), lines[1:]):
        card = model.card()
        assert line.startswith(model.name + " ") and f" {model.kind} " in line
        assert card["trained_on"] in line and f"{card['test']['metric']} {card['test']['score']:.2f} " in line
        assert f"{model.size_bytes() / 1e6:.1f} MB" in line
    for model in TRAINED.values():  # a known model without weights is only named on stderr, with its build
        assert (model.name in err) == (not model.shipped)
        if not model.shipped:
            assert model.build in err


def test_models_json(capsys):
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == [m.name for m in shipped_models()]
    assert all(r["size_bytes"] > 0 and r["test"]["score"] for r in rows)


def test_models_in_an_install_without_weights(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(trained, "TRAINED_DIR", tmp_path)
    assert main(["models"]) == 0
    out, err = capsys.readouterr()
    assert "no trained model is shipped" in out and "bna-minilm (parser): make models-parsers" in err


@needs_pipeline  # bna-scratch reads spaCy's tags
def test_parse_by_name_equals_the_library(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("The cat sat on the mat .\n", encoding="utf-8")
    assert main(["parse", "--model", "bna-scratch", "--input", str(src), "--pretokenized", "--tags", "none"]) == 0
    out = capsys.readouterr().out.strip()
    parser = ChartParser.from_pretrained(TRAINED["bna-scratch"].folder)
    tags = parser.spacy_tags([src.read_text().split()]) if parser.config.pos != "none" else None
    tree = parser.parse([src.read_text().split()], tags)[0]
    for leaf in tree.preterminals():
        leaf.label = "XX"
    assert out == tree.to_string()


@pytest.mark.parametrize("argv, message", [
    (["parse", "--model", "bna-huge"], "'bna-huge' is neither a folder nor a trained parser's name; the parser "
                                       "names: bna-minilm"),
    (["translate", "--model", "bna-minilm"], "'bna-minilm' is a trained parser, not a translator"),
])
def test_bad_names_are_one_line_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_translate_with_a_known_name_not_shipped_says_how_to_build_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(trained, "TRAINED_DIR", tmp_path)
    assert main(["translate", "--model", "hybrid-gate-en-de"]) == 2
    err = capsys.readouterr().err
    assert "the trained translator 'hybrid-gate-en-de' is not shipped with this install yet" in err
    assert "make models-nmt" in err


@pytest.mark.parametrize("name", [m.name for m in shipped_models()])
def test_models_name_prints_the_card_with_domain_strengths_limits_scores_size_and_command(name, capsys):
    assert main(["models", name]) == 0
    out = capsys.readouterr().out
    card = TRAINED[name].card()
    for label in ("- data:", "- domain:", "- good at:", "- bad at:", "- test score:", "- weights:", "- exact command:"):
        assert label in out, label
    assert card["command"] in out and str(card["test"]["score"]) in out
    assert main(["models", name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bad_at"] == TRAINED[name].bad_at


def test_the_cards_state_domain_and_limits_plainly():
    translator = TRAINED["hybrid-gate-en-de"]
    assert "image captions" in translator.domain and "out-of-domain text breaks" in translator.bad_at
    for name in ("bna-minilm", "bna-scratch"):
        assert "3,068 training trees" in TRAINED[name].domain and "questions" in TRAINED[name].bad_at
    assert '"It purred." comes out as an NP' in TRAINED["bna-minilm"].bad_at
    for model in shipped_models():  # the shipped files say what the registry says
        card = model.card()
        assert (card["domain"], card["good_at"], card["bad_at"]) == (model.domain, model.good_at, model.bad_at)
        assert f"- bad at: {model.bad_at}" in (model.folder / "CARD.md").read_text(encoding="utf-8")


def test_models_unknown_name_is_one_line(capsys):
    assert main(["models", "bna-minilmm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no trained model is called 'bna-minilmm'" in err and "bna-minilm" in err
