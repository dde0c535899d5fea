"""Translator.evaluate: the object that translates also scores, with sacreBLEU's own corpus BLEU."""
from __future__ import annotations

import pytest

from structattn.errors import UserError
from structattn.translation.data import train_bpe_tokenizer
from structattn.translation.model import build_model
from structattn.translation.translator import Translator

SOURCES = ["A dog runs here.", "Two young men sit on a bench.", ""]
REFERENCES = ["Ein Hund läuft hier.", "Zwei junge Männer sitzen auf einer Bank.", ""]


def _translator() -> Translator:
    tokenizer = train_bpe_tokenizer(SOURCES * 5 + REFERENCES * 5, vocab_size=120)
    return Translator(build_model(tokenizer, "micro", "transformer", seed=0).eval(), tokenizer)


def test_evaluate_is_sacrebleu_of_its_own_translations():
    from sacrebleu.metrics import BLEU

    tr = _translator()
    scored = tr.evaluate(SOURCES, REFERENCES, beam=1)
    hypotheses = tr.translate(SOURCES, beam=1)
    assert scored["hypotheses"] == hypotheses and scored["lines"] == 3 and scored["cut"] == 0
    assert scored["bleu"] == BLEU().corpus_score(hypotheses, [REFERENCES]).score
    assert scored["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_evaluate_needs_one_reference_per_source():
    with pytest.raises(UserError, match="2 source lines for 3 references"):
        _translator().evaluate(SOURCES[:2], REFERENCES)
