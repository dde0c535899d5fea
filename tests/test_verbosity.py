"""Loading through the library is quiet (no transformers progress bars or load reports) unless asked."""
from __future__ import annotations

import logging

import pytest
from transformers import BertConfig, BertModel
from transformers.utils import logging as hf_logging

import structattn
from structattn.verbosity import is_verbose, quiet_loading, set_verbose


@pytest.fixture
def tiny_bert(tmp_path):
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        vocab_size=100, max_position_embeddings=64)
    BertModel(config).save_pretrained(tmp_path)
    return str(tmp_path)


@pytest.fixture(autouse=True)
def default_verbosity(monkeypatch):
    monkeypatch.delenv("STRUCTATTN_VERBOSE", raising=False)
    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    yield
    set_verbose(None)
    logging.getLogger("structattn").setLevel(logging.NOTSET)


def test_quiet_inside_and_restored_after():
    with quiet_loading():
        assert hf_logging.get_verbosity() == logging.ERROR and not hf_logging.is_progress_bar_enabled()
    assert hf_logging.get_verbosity() == logging.WARNING and hf_logging.is_progress_bar_enabled()


def test_asked_for_by_flag_logger_level_or_environment(monkeypatch):
    assert not is_verbose()
    logging.getLogger("structattn").setLevel(logging.INFO)
    assert is_verbose()
    logging.getLogger("structattn").setLevel(logging.NOTSET)
    monkeypatch.setenv("STRUCTATTN_VERBOSE", "1")
    assert is_verbose()
    set_verbose(False)
    assert not is_verbose()
    set_verbose(True)
    with quiet_loading():
        assert hf_logging.is_progress_bar_enabled()


def test_loading_an_encoder_with_a_new_head_says_nothing_unless_asked(tiny_bert, capfd):
    structattn.from_pretrained(tiny_bert, task="sequence-classification", mechanism="sla", num_labels=2)
    assert capfd.readouterr().err == ""
    structattn.set_verbose(True)
    structattn.from_pretrained(tiny_bert, task="sequence-classification", mechanism="sla", num_labels=2)
    err = capfd.readouterr().err
    assert "Loading weights" in err or "LOAD REPORT" in err
