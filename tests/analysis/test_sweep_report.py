import dataclasses
import json
import math
from pathlib import Path

import pytest
from scipy import stats

from fixtures import make_tiny_model, make_tiny_sst2
from structattn.analysis.report import best_configs, load_runs, markdown_table, runner_result_files
from structattn.errors import UserError
from structattn.run_config import RunConfig
from structattn.train.config import RESULT_NEUTRAL_FIELDS, config_key
from structattn.train.significance import holm, mean_std, welch_p
from structattn.sweep import parse_variant, record_config, run_grid, variant_label

RESULTS = Path(__file__).resolve().parents[2] / "results"


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


def test_labels_show_every_option_that_is_not_the_default():
    assert variant_label({"mechanism": "sla", "m": 3, "gate_bias": -2.0}) == "SLA (m=3, bias=-2)"
    assert variant_label({"mechanism": "sla", "gate_bias": 0.0}) == "SLA (m=3)"  # the mechanism's own defaults
    assert variant_label({"mechanism": "sla", "m": 3, "k": 5}) == "SLA (m=3, k=5)"
    assert variant_label({"mechanism": "global", "lisa_weight": 1.0, "gate_bias": 1.5}) == "LISA (w=1, bias=1.5)"
    assert variant_label({"mechanism": "wla", "k": 4, "gate_bias": -1.0, "lisa_weight": 0.1}) == \
        "WLA (k=4, bias=-1) + LISA (w=0.1)"


def test_welch_matches_hand_computation():
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 7.0]
    # by hand: variances 1 and 7/3, se^2 = 1/3 + 7/9 = 10/9, t = -(10/3) / sqrt(10/9) = -3.1623,
    # Welch-Satterthwaite df = (10/9)^2 / ((1/3)^2/2 + (7/9)^2/2) = 3.4483
    t = (10 / 3) / math.sqrt(10 / 9)
    df = (10 / 9) ** 2 / ((1 / 3) ** 2 / 2 + (7 / 9) ** 2 / 2)
    assert df == pytest.approx(3.4483, abs=1e-4)
    assert welch_p(a, b) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9)
    assert math.isnan(welch_p([1.0], b))
    assert mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0)


def test_holm_matches_hand_computation():
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): 4 * 0.005 = 0.02, 3 * 0.01 = 0.03, 2 * 0.03 = 0.06,
    # 1 * 0.04 = 0.04 raised to the 0.06 before it; back in the order given
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, 0.5]) == pytest.approx([1.0, 1.0])  # 2 * 0.5 = 1.0; 0.6 raised to it; capped at 1
    assert holm([0.2]) == [0.2] and holm([]) == []
    with pytest.raises(ValueError, match="NaN"):
        holm([0.1, math.nan])


def _run(task, mech, seed, best, lr=3e-5, **kw):
    rec = {"task": task, "mechanism": mech, "seed": seed, "best": best, "learning_rate": lr, "epochs": 3.0,
           "max_train_examples": 0, "command": "structattn sweep ..."}
    rec.update(kw)
    return rec


def test_best_config_is_best_mean_and_table_has_p_values():
    runs = [_run("sst2", "global", s, v) for s, v in [(1, .90), (2, .91), (3, .92)]]
    runs += [_run("sst2", "global", s, v, lr=2e-5) for s, v in [(1, .80), (2, .81), (3, .82)]]
    runs += [_run("sst2", "sla", s, v, m=3) for s, v in [(1, .93), (2, .94), (3, .95)]]
    runs += [_run("sst2", "wla", s, v, k=3) for s, v in [(1, .90), (2, .92), (3, .95)]]
    best = best_configs(runs)
    assert best[("sst2", "baseline")]["lr"] == 3e-5
    table = markdown_table(runs)
    assert "91.00 ± 1.00 (n=3)" in table and "94.00 ± 1.00 (n=3)" in table
    # SLA vs baseline by hand: variances 1 and 1, se^2 = 2/3, t = 3 / sqrt(2/3) = 3.674, df = 4: p = 0.0213
    p_sla = stats.ttest_ind([93, 94, 95], [90, 91, 92], equal_var=False).pvalue
    assert p_sla == pytest.approx(0.02131, abs=1e-5)
    p_wla = stats.ttest_ind([90, 92, 95], [90, 91, 92], equal_var=False).pvalue
    assert p_wla > p_sla
    # Holm over the family of both comparisons: 2 * the smaller; the larger never below it
    assert f"| SLA (m=3) | {p_sla:.3f} / {2 * p_sla:.3f} |" in table
    assert f"| WLA (k=3) | {p_wla:.3f} / {max(p_wla, 2 * p_sla):.3f} |" in table
    assert "(2 comparisons)" in table and "Holm-adjusted p < 0.05: SLA (m=3) on SST-2." in table


def test_runs_of_other_settings_never_share_a_cell():
    runs = [_run("sst2", "global", s, v, max_length=64) for s, v in [(1, .90), (2, .91)]]
    runs += [_run("sst2", "global", s, v, max_length=128) for s, v in [(1, .80), (2, .82)]]
    runs += [_run("sst2", "sla", s, v, m=3, max_length=128) for s, v in [(1, .83), (2, .86)]]
    runs += [_run("sst2", "sla", s, v, m=3, max_length=128, gate_bias=-2.0) for s, v in [(1, .70), (2, .71)]]
    best = best_configs(runs)
    assert best[("sst2 [max_length=64]", "baseline")]["scores"] == [90.0, 91.0]
    assert best[("sst2 [max_length=128]", "baseline")]["scores"] == [80.0, 82.0]
    assert best[("sst2 [max_length=128]", "SLA (m=3)")]["scores"] == [83.0, 86.0]
    assert best[("sst2 [max_length=128]", "SLA (m=3, bias=-2)")]["scores"] == [70.0, 71.0]
    assert ("sst2 [max_length=64]", "SLA (m=3)") not in best
    table = markdown_table(runs)
    assert "| variant | SST-2, max_length=128 | SST-2, max_length=64 | Average |" in table
    # SLA is compared with the baseline of its own settings, never the other one
    p = stats.ttest_ind([83, 86], [80, 82], equal_var=False).pvalue
    assert f"| SLA (m=3) | {p:.3f} / " in table
    # one task in two columns: no average over tasks
    assert "| baseline | 81.00 ± 1.41 (n=2) | 90.50 ± 0.71 (n=2) | – |" in table
    assert "long_inputs='token-windows-before-0.2', max_length=64\n" in table  # each cell names what sets it apart from the defaults


def test_the_learning_rate_is_chosen_only_among_otherwise_identical_runs():
    runs = [_run("cola", "global", s, v, batch_size=32) for s, v in [(1, .30), (2, .32)]]
    runs += [_run("cola", "global", s, v, lr=2e-5, batch_size=16) for s, v in [(1, .40), (2, .42)]]
    best = best_configs(runs)
    assert best[("cola [batch_size=32]", "baseline")]["scores"] == [30.0, 32.0]
    assert best[("cola [batch_size=16]", "baseline")]["lr"] == 2e-5


def test_old_lines_get_their_configuration_from_what_they_record():
    command = ("structattn sweep --results-dir results --run-root runs/sweeps --eval-every 0 --batch-size 32 "
               "--learning-rate 5e-5 --task cola --variants global wla:k=3 sla:m=3 --seeds 1 2 3 --epochs 2 "
               "--max-length 64")
    old = {"task": "cola", "mechanism": "sla", "m": 3, "k": None, "lisa_weight": 0.0, "seed": 1, "epochs": 2.0,
           "learning_rate": 5e-05, "model": "all-MiniLM-L6-v2", "batch_size": 32, "max_length": 64,
           "max_train_examples": 0, "best": 0.2, "command": command}
    cfg = record_config(old)
    # from the command (eval_every), and the values in force before these fields were recorded
    assert (cfg.eval_every, cfg.model, cfg.gate_bias, cfg.stride, cfg.group_by_length, cfg.long_inputs) == \
        (0, "", None, 32, False, "token-windows-before-0.2")
    same = RunConfig(task="cola", mechanism="sla", m=3, seed=1, learning_rate=5e-5, epochs=2, max_length=64,
                       eval_every=0, long_inputs="token-windows-before-0.2", output_dir="anywhere", checkpoint_every=7)
    assert config_key(cfg) == config_key(same)
    # today's word-aligned windows compute something else for long examples: never the old lines' key
    assert config_key(dataclasses.replace(same, long_inputs="windows")) != config_key(cfg)
    assert record_config({"config": dataclasses.asdict(same)}) == same  # new lines carry it whole
    with pytest.raises(UserError, match="--config x.json"):
        record_config(dict(old, command="structattn sweep --config x.json --seeds 1"), source="old.jsonl:3")


def test_the_key_covers_every_field_but_the_result_neutral_ones():
    base = RunConfig(mechanism="sla")
    changed = {int: lambda v: v + 1, float: lambda v: v * 2 + 1, str: lambda v: v + "x", bool: lambda v: not v,
               type(None): lambda v: 1, dict: lambda v: {"note": 1}}
    for f in dataclasses.fields(RunConfig):
        value = getattr(base, f.name)
        new = "wla" if f.name == "mechanism" else changed[type(value)](value)  # a mechanism that exists
        other = dataclasses.replace(base, **{f.name: new})
        if f.name in RESULT_NEUTRAL_FIELDS:
            assert config_key(other) == config_key(base), f.name
        else:
            assert config_key(other) != config_key(base), f.name
    assert config_key(dataclasses.replace(base, m=3)) == config_key(base)  # None runs as the mechanism's m=3


def test_committed_results_keep_one_configuration_per_cell():
    """Each cell of the committed results holds the 3 seeds of one configuration. The older lines predate
    ``config`` and are rebuilt from what they record; their windowing can no longer be asked for, so the SG-Net
    sweep's lines (which record ``config``) and the baseline it reran form their own CoLA and SST-2-slice
    columns (update when results of other settings are committed)."""
    best = best_configs(load_runs(RESULTS))
    old, new = "[long_inputs='token-windows-before-0.2']", "[long_inputs='truncate']"
    assert sorted({c for c, _ in best}) == [f"cola {old}", f"cola {new}", "conll2003", "fce", "mrpc", "rte", "sst2",
                                           f"sst2:first10000 {old}", f"sst2:first10000 {new}", "stsb"]
    assert all(b["seeds"] == [1, 2, 3] for b in best.values())
    assert best[(f"cola {old}", "baseline")]["settings"] == {"eval_every": 0, "long_inputs": "token-windows-before-0.2",
                                                            "max_length": 64}
    assert {v for c, v in best if c.endswith(new)} == {"baseline", "SG-Net"}


def test_the_report_reads_only_the_runners_task_files(tmp_path):
    """Other systems' results beside the runner's (the parser's parsing.jsonl) are not the runner's lines."""
    line = json.loads((RESULTS / "cola.jsonl").read_text(encoding="utf-8").splitlines()[0])
    (tmp_path / "cola.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    (tmp_path / "parsing.jsonl").write_text(json.dumps({"command": ["train-parser"], "config": {"d_model": 8}})
                                            + "\n", encoding="utf-8")
    ours, others = runner_result_files(tmp_path)
    assert [p.name for p in ours] == ["cola.jsonl"] and [p.name for p in others] == ["parsing.jsonl"]
    assert [r["_source"] for r in load_runs(tmp_path)] == ["cola.jsonl:1"]


@pytest.mark.slow
def test_sweep_runs_configurations_that_differ_in_one_setting(tmp_path, monkeypatch, capsys):
    data = make_tiny_sst2(tmp_path / "data", n_train=16, n_dev=8)
    monkeypatch.setenv("STRUCTATTN_DATA", str(data))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    model, other = make_tiny_model(tmp_path / "model"), make_tiny_model(tmp_path / "other")
    first = RunConfig(task="sst2", model=str(model), batch_size=8, max_length=32, stride=8, max_steps=1,
                        eval_every=0)
    changes = [{}, {"variant": "sla:m=2,bias=-1"}, {"max_length": 24}, {"batch_size": 4}, {"stride": 4},
               {"model": str(other)}]
    for change in changes + [{}]:
        variant = change.get("variant", "sla:m=2")
        base = dataclasses.replace(first, **{k: v for k, v in change.items() if k != "variant"})
        run_grid(base, [variant], [1], [base.learning_rate], [base.epochs], tmp_path / "results", tmp_path / "runs",
                 command="structattn sweep (test)")
    err = capsys.readouterr().err
    assert err.count("skip (already in") == 1  # only the repeated first configuration
    runs = load_runs(tmp_path / "results")
    assert len(runs) == len(changes) and len({r["config_key"] for r in runs}) == len(changes)
    assert all(record_config(r) == RunConfig.from_dict(r["config"]) for r in runs)
    best = best_configs(runs)
    assert len(best) == len(changes) and all(len(b["scores"]) == 1 for b in best.values())
    assert ("sst2 [batch_size=8, max_length=32, model=%r, stride=8]" % str(model), "SLA (m=2, bias=-1)") in best


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
