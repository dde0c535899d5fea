import json
import math

import pytest

from structattn.analysis.report import best_configs, markdown_table
from structattn.errors import UserError
from structattn.train.significance import mean_std, welch_p
from structattn.train.sweep import parse_variant, variant_label


def test_parse_variant():
    assert parse_variant("sla:m=4") == {"mechanism": "sla", "m": 4}
    assert parse_variant("wla:k=5") == {"mechanism": "wla", "k": 5}
    assert parse_variant("lisa") == {"mechanism": "global", "lisa_weight": 1.0}
    assert parse_variant("sla:m=3,w=0.5") == {"mechanism": "sla", "m": 3, "lisa_weight": 0.5}
    with pytest.raises(UserError, match="unknown variant 'syntax'"):
        parse_variant("syntax")
    with pytest.raises(UserError, match="unknown option 'q'"):
        parse_variant("sla:q=1")


def test_labels():
    assert variant_label({"mechanism": "global"}) == "baseline"
    # the weight is part of the name: runs with different weights are different rows
    assert variant_label({"mechanism": "global", "lisa_weight": 1.0}) == "LISA (w=1)"
    assert variant_label({"mechanism": "sla", "m": 3, "lisa_weight": 0.1}) == "SLA (m=3) + LISA (w=0.1)"
    assert variant_label({"mechanism": "sla", "m": 4}) == "SLA (m=4)"
    assert variant_label({"mechanism": "wla", "k": None}) == "WLA (k=3)"


def test_welch_matches_hand_computation():
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 7.0]
    # by hand: variances 1 and 7/3, se^2 = 1/3 + 7/9 = 10/9, t = -(10/3) / sqrt(10/9) = -3.1623,
    # Welch-Satterthwaite df = (10/9)^2 / ((1/3)^2/2 + (7/9)^2/2) = 3.4483
    from scipy.stats import t as student_t
    t = (10 / 3) / math.sqrt(10 / 9)
    df = (10 / 9) ** 2 / ((1 / 3) ** 2 / 2 + (7 / 9) ** 2 / 2)
    assert df == pytest.approx(3.4483, abs=1e-4)
    assert welch_p(a, b) == pytest.approx(2 * student_t.sf(t, df), rel=1e-9)
    assert math.isnan(welch_p([1.0], b))
    assert mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0)


def _run(task, mech, seed, best, lr=3e-5, **kw):
    rec = {"task": task, "mechanism": mech, "seed": seed, "best": best, "learning_rate": lr, "epochs": 3.0,
           "max_train_examples": 0, "command": "structattn sweep ..."}
    rec.update(kw)
    rec["label"] = variant_label(rec)
    return rec


def test_best_config_is_best_mean_and_table_has_p_values():
    runs = [_run("sst2", "global", s, v) for s, v in [(1, .90), (2, .91), (3, .92)]]
    runs += [_run("sst2", "global", s, v, lr=2e-5) for s, v in [(1, .80), (2, .81), (3, .82)]]
    runs += [_run("sst2", "sla", s, v, m=3) for s, v in [(1, .93), (2, .94), (3, .95)]]
    best = best_configs(runs)
    assert best[("sst2", "baseline")]["lr"] == 3e-5
    table = markdown_table(runs)
    assert "91.00 ± 1.00 (n=3)" in table and "94.00 ± 1.00 (n=3)" in table
    p = welch_p([93, 94, 95], [90, 91, 92])
    assert f"{p:.3f}" in table


def test_columns_name_the_main_metric_and_every_metric_is_reported():
    def mrpc(mech, seed, acc, f1, **kw):
        return _run("mrpc", mech, seed, f1, main_metric="f1", best_metrics={"accuracy": acc, "f1": f1,
                                                                         "gate_means": [0.5]}, **kw)
    runs = [mrpc("global", 1, .70, .80), mrpc("global", 2, .72, .82), mrpc("sla", 1, .74, .84, m=3),
            mrpc("sla", 2, .76, .86, m=3)]
    table = markdown_table(runs)
    assert "| variant | MRPC (f1) | Average |" in table
    assert "| baseline | 81.00 ± 1.41 (n=2) | 81.00 |" in table
    # both metrics of the selected runs, gates left out
    assert "| variant | accuracy | f1 |" in table
    assert "| baseline | 71.00 ± 1.41 | 81.00 ± 1.41 |" in table
    assert "| SLA (m=3) | 75.00 ± 1.41 | 85.00 ± 1.41 |" in table
    assert "gate_means" not in table


def test_runs_on_different_training_data_never_share_a_column():
    runs = [_run("sst2", "global", s, v, max_train_examples=10000) for s, v in [(1, .95), (2, .96)]]
    runs += [_run("sst2", "global", s, v) for s, v in [(1, .90), (2, .91)]]
    runs += [_run("sst2", "sla", s, v, m=3, max_train_examples=10000) for s, v in [(1, .97), (2, .98)]]
    runs += [_run("cola", "global", s, v, main_metric="mcc") for s, v in [(1, .20), (2, .22)]]
    runs += [_run("cola", "sla", s, v, m=3, main_metric="mcc") for s, v in [(1, .24), (2, .26)]]
    best = best_configs(runs)
    assert best[("sst2", "baseline")]["scores"] == [90.0, 91.0]
    assert best[("sst2:first10000", "baseline")]["scores"] == [95.0, 96.0]
    assert ("sst2", "SLA (m=3)") not in best
    table = markdown_table(runs)
    assert "| variant | CoLA (mcc) | SST-2 | SST-2, first 10,000 | Average |" in table
    # the average runs over full-data columns only, and only where the variant has them all
    assert "| baseline | 21.00 ± 1.41 (n=2) | 90.50 ± 0.71 (n=2) | 95.50 ± 0.71 (n=2) | 55.75 |" in table
    assert "| SLA (m=3) | 25.00 ± 1.41 (n=2) | – | 97.50 ± 0.71 (n=2) | – |" in table


def test_rows_follow_the_paper_baseline_wla_sla_lisa():
    runs = []
    for mech, extra in [("global", {"lisa_weight": 1.0}), ("sla", {"m": 3}), ("global", {}), ("wla", {"k": 3})]:
        runs += [_run("cola", mech, s, 0.2 + s / 100, main_metric="mcc", **extra) for s in (1, 2)]
    rows = [line.split(" | ")[0] for line in markdown_table(runs).splitlines()[2:6]]
    assert rows == ["| baseline", "| WLA (k=3)", "| SLA (m=3)", "| LISA (w=1)"]
