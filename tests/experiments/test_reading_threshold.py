"""results/squad2/threshold/: the shipped reader's no-answer threshold, chosen on the dev part. Each committed line
is what the project's scorer gives on the committed files at its threshold, and the dev-part choice is the official
best-F1 sweep of the committed dev files."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from structattn.cli import main as cli
from structattn.tasks.squad import get_qa_task
from structattn.tasks.squad_eval import best_threshold

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from tasks_testutil import needs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LINES = [json.loads(line) for line in (REPO / "results" / "squad2" / "threshold" / "threshold.jsonl")
         .read_text(encoding="utf-8").splitlines()]


@pytest.mark.data
@needs("squad2")
@pytest.mark.parametrize("line", LINES, ids=[f"{x['part']}-{x['threshold_source'].split()[0]}" for x in LINES])
def test_each_threshold_line_is_the_scorer_on_its_committed_files(line, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    words = shlex.split(line["rescore"])
    assert words[:3] == ["structattn", "score", "squad"]
    assert cli(words[1:]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["f1"], printed["exact"]) == pytest.approx((line["f1"], line["exact"]), abs=1e-9)


@pytest.mark.data
@needs("squad2")
def test_the_dev_choice_is_the_official_best_f1_sweep_of_the_committed_dev_files():
    """The official sweep runs in no-answer probabilities; its best threshold is σ of the chosen na-score one."""
    (line,) = [x for x in LINES if x["part"] == "dev" and x["threshold_source"].startswith("dev part")]
    nonnull = json.loads((REPO / line["predictions"]).read_text(encoding="utf-8"))
    na_probs = json.loads((REPO / line["na_prob"]).read_text(encoding="utf-8"))
    best_f1, thresh = best_threshold(nonnull, na_probs, get_qa_task("squad2").read("dev").dataset)
    assert thresh == pytest.approx(line["na_prob_threshold"], abs=1e-12)
    assert best_f1 == pytest.approx(line["f1"], abs=1e-9)


def test_at_the_saved_threshold_the_committed_files_give_the_shipped_answers():
    """The committed best spans and na-scores, cut at the threshold saved with the reader, are the committed
    answers of the shipped reader (results/shipped/), question for question."""
    (line,) = [x for x in LINES if x["part"] == "test" and x["threshold_source"].startswith("saved")]
    nonnull = json.loads((REPO / line["predictions"]).read_text(encoding="utf-8"))
    na_scores = json.loads((REPO / line["predictions"].replace(".nonnull.", ".na_score.")).read_text(encoding="utf-8"))
    shipped = json.loads((REPO / "results" / "shipped" / "sgnet-squad2.squad2-test.json").read_text(encoding="utf-8"))
    saved = json.loads((REPO / "src" / "structattn" / "trained" / "sgnet-squad2" / "span_qa.json")
                       .read_text(encoding="utf-8"))["na_threshold"]
    assert line["na_score_threshold"] == saved
    assert {q: ("" if na_scores[q] > saved else a) for q, a in nonnull.items()} == shipped
