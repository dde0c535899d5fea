"""experiments/peers/: the comparison scripts give, from the committed files, the figures recorded beside them."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from tasks_testutil import needs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from experiments_testutil import load_experiment  # noqa: E402

from structattn.tasks import ptb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


def _lines(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@needs(str(ptb.PTB_SUBDIR / "wsj_0199.mrg"))
def test_the_twelve_epoch_comparison_rescores_to_its_committed_lines(capsys):
    load_experiment("peers/supar_vs_bna").main([])
    committed = [json.loads(line) for line in (RESULTS / "peers" / "supar_vs_bna.jsonl").read_text().splitlines()]
    assert _lines(capsys) == committed


@needs("multi30k/raw/test_2016_flickr.de")
def test_the_laptop_translations_rescore_to_their_recorded_bleu(capsys):
    load_experiment("peers/joey_vs_ours").main(["--laptop"])
    printed = _lines(capsys)
    bleu = {line["file"]: line["bleu"] for line in printed if "bleu" in line and "file" in line}
    recorded = [json.loads(line) for line in (RESULTS / "laptop_defaults.jsonl").read_text().splitlines()]
    ours = [r for r in recorded if r["output"] in bleu]
    assert {r["name"] for r in ours} >= {"hg"}  # the hybrid gate's first seed is recorded
    assert all(bleu[r["output"]] == r["score"] for r in ours)
    compared = [line for line in printed if "minus_joey" in line]
    assert {line["variant"] for line in compared} == {"transformer", "hybrid_gate"}
    assert all(0 < line["p"] <= line["p_holm"] <= 1 for line in compared)
    committed = [json.loads(line) for line in (RESULTS / "peers" / "joey_vs_ours_laptop.jsonl").read_text().splitlines()]
    assert printed == committed


@needs("multi30k/raw/test_2016_flickr.de", "multi30k/raw/test_2017_mscoco.de")
def test_the_full_length_translations_rescore_to_their_committed_comparison(capsys):
    load_experiment("peers/joey_vs_ours").main([])
    committed = [json.loads(line) for line in (RESULTS / "peers" / "joey_vs_ours.jsonl").read_text().splitlines()]
    assert _lines(capsys) == committed
