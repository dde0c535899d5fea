"""experiments/fault_campaign.py's own functions on real CLI runs: a clear error, a success, an atomic output."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from experiments_testutil import ROOT, load_experiment  # noqa: E402


@pytest.fixture(scope="module")
def campaign():
    return load_experiment("fault_campaign")


def test_unequal_bleu_files_are_a_clear_error(campaign, tmp_path):
    ref = campaign.write(tmp_path / "ref.txt", "Ein Mann geht.\nEin Hund läuft.\nEine Katze schläft.\n")
    hyp = campaign.write(tmp_path / "hyp.txt", "Ein Mann geht.\nEin Hund läuft.\n")
    row = campaign.run_case(campaign.Case("bleu-unequal", "input", ["score", "bleu", "--gold", ref,
                                                                    "--predictions", hyp]))
    assert row["class"] == "clear error", row
    assert row["rc"] == 2 and "2 hypotheses for 3 references" in row["stderr_first"]


def test_equal_bleu_files_are_a_success(campaign, tmp_path):
    ref = campaign.write(tmp_path / "ref.txt", "Ein Mann geht.\nEin Hund läuft.\n")
    row = campaign.run_case(campaign.Case("bleu-ok", "input", ["score", "bleu", "--gold", ref,
                                                               "--predictions", ref, "--json"], expect="accept"))
    assert row["class"] == "success", row
    assert row["rc"] == 0


def test_a_refused_input_leaves_the_existing_output_unchanged(campaign, tmp_path):
    if not (ROOT / "src" / "structattn" / "trained" / campaign.PARSER).is_dir():
        pytest.skip(f"the shipped parser {campaign.PARSER} is not in this checkout")
    bad = campaign.write(tmp_path / "nul.txt", "a dog\x00 runs\n")
    keep = campaign.write(tmp_path / "keep.trees", "(TOP (X keep))\n")
    row = campaign.run_case(campaign.Case("keep", "output", ["parse", "--model", campaign.PARSER, "--pretokenized",
                                                             "--input", bad, "--output", keep], unchanged=keep))
    assert row["class"] == "clear error", row
    assert Path(keep).read_text() == "(TOP (X keep))\n"


def test_the_classifier_on_made_up_outcomes(campaign, tmp_path):
    o = campaign.Outcome
    assert campaign.classify(o(1, "Traceback (most recent call last):\n  x\nValueError: y\n", 0)) == "traceback"
    assert campaign.classify(o(2, "usage: structattn x\nstructattn x: error: bad\n", 0)) == "clear error"
    assert campaign.classify(o(1, "something\nwent wrong\n", 0)) == "unclear error"
    assert campaign.classify(o(0, "", 0), expect="refuse") == "silent"
    assert campaign.classify(o(0, "note: 2 blank lines\n", 0), expect="refuse") == "handled"
    assert campaign.classify(o(0, "train-parsing step 1: dev f1 0\n", 0), expect="refuse") == "silent"
    assert campaign.classify(o(0, "", 0), expect="accept", output=tmp_path / "absent") == "silent"
    assert campaign.classify(o(None, "", 0)) == "hang"
    kept = tmp_path / "kept"
    kept.write_text("new")
    assert campaign.classify(o(2, "x: error: y\n", 0), unchanged=(kept, b"old")) == "data lost"


def test_a_signalled_run_stops_cleanly_only_with_its_status_and_line(campaign):
    import signal

    line = "train-parsing step 3: dev f1 1\nstopped by SIGTERM; resume with the same command\n"
    assert campaign.stopped_class(campaign.Outcome(143, line, 1.0), signal.SIGTERM) == "success"
    assert campaign.stopped_class(campaign.Outcome(130, line, 1.0), signal.SIGTERM) == "unclear error"
    assert campaign.stopped_class(campaign.Outcome(-15, "", 1.0), signal.SIGTERM) == "unclear error"  # no handler
    assert campaign.stopped_class(campaign.Outcome(130, "Traceback (most recent call last):\n", 1.0),
                                  signal.SIGINT) == "traceback"
    assert campaign.stopped_class(campaign.Outcome(-9, "", 1.0), signal.SIGKILL) == "success"


def test_a_damaged_copy_leaves_the_template_intact(campaign, tmp_path):
    template = tmp_path / "t"
    campaign.write(template / "a.json", '{"x": 1}')
    for how in campaign.DAMAGES:
        copy = campaign.damaged_copy(template, tmp_path / how, "a.json", how)
        damaged = copy / "a.json"
        assert not damaged.exists() if how == "deleted" else damaged.read_bytes() != b'{"x": 1}'
    assert (template / "a.json").read_text() == '{"x": 1}'
