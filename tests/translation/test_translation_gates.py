"""Gate statistics of a translation model: per layer and per POS, padding and </s> excluded."""
from __future__ import annotations

import pytest

from structattn.translation.gates import gate_statistics
from structattn.attention import force_gate
from structattn.errors import UserError
from structattn.translation.data import train_bpe_tokenizer
from structattn.translation.model import build_model
from structattn.translation.translator import Translator

TEXTS = ["A dog runs here.", "Two young men sit on a bench in the park.", "", "Cats sleep."]


def _translator(variant: str, **options) -> Translator:
    tokenizer = train_bpe_tokenizer(TEXTS * 5 + ["Ein Hund läuft hier."] * 5, vocab_size=120)
    return Translator(build_model(tokenizer, "micro", variant, seed=0, **options).eval(), tokenizer)


def test_a_constant_gate_gives_that_mean_everywhere_and_counts_every_word_piece():
    tr = _translator("hybrid_gate")
    with force_gate(tr.model, 0.25):
        stats = gate_statistics(tr, TEXTS)
    pieces = sum(len(x) - 1 for x in tr.encode([t for t in TEXTS if t]))  # all but </s>
    assert stats["sentences"] == 3 and stats["pieces"] == pieces and stats["lowest_layer"] == 0
    assert stats["layers"] == {"0": pytest.approx(0.25), "1": pytest.approx(0.25)}
    assert all(v["mean"] == pytest.approx(0.25) for v in stats["pos"].values())
    assert sum(v["pieces"] for v in stats["pos"].values()) == pieces
    assert {"NOUN", "VERB", "DET"} <= set(stats["pos"])


def test_only_gated_layers_are_reported():
    tr = _translator("hybrid_gate", layers=[1])
    stats = gate_statistics(tr, TEXTS)
    assert list(stats["layers"]) == ["1"] and stats["lowest_layer"] == 1


def test_a_model_without_a_gate_is_refused():
    with pytest.raises(UserError, match="has no gate"):
        gate_statistics(_translator("local"), TEXTS)
