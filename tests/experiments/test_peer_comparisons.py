"""experiments/peers/: the comparison scripts give, from the committed files, the figures recorded beside them."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

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
@pytest.mark.parametrize("script, args, jsonl", [
    ("peers/supar_vs_bna", [], "supar_vs_bna.jsonl"),                # the twelve-epoch comparison
    ("peers/supar_vs_bna", ["--minilm"], "minilm_vs_supar.jsonl"),   # the same fine-tuned encoder
    ("peers/per_label", [], "per_label.jsonl"),                      # per-label F1 of every committed parse
    ("peers/paired", ["bna-minilm-ft-s1:sa-minilm-ft-s1", "bna-minilm-ft-s2:sa-minilm-ft-s2", "--seed-paired"],
     "bna_vs_sa_minilm.jsonl"),                                      # BNA against self-attention, same encoder
    ("peers/paired", [f"ablation-{name}-s1:bna-converged-s1" for name in
                      ("dropout", "lr", "loss", "batch", "scorer", "optimizer", "chars", "width")],
     "ablations_vs_bna.jsonl"),                                      # one change toward SuPar's recipe each
    *[("peers/paired", [f"ablation-{name}-s1:bna-converged-s1", f"ablation-{name}-s2:bna-converged-s2",
                        "--seed-paired"], f"{name}_two_seeds.jsonl")  # the changes that helped, two seeds
      for name in ("optimizer", "width")],
    ("peers/paired", ["ablation-width-s1:supar-converged-s1", "ablation-width-s2:supar-converged-s2", "--seed-paired"],
     "width_vs_supar.jsonl"),                                        # the gap left to SuPar
    ("peers/paired", ["recipe-s1:bna-converged-s1", "recipe-s2:bna-converged-s2", "--seed-paired"],
     "recipe_two_seeds.jsonl"),                                      # width and SuPar's optimiser together
    ("peers/paired", ["ablation-scorer-dropout-s1:ablation-dropout-s1", "ablation-scorer-dropout-s1:bna-converged-s1"],
     "scorer_dropout.jsonl"),                                        # SuPar's scorer under its own dropout
    ("peers/paired", [*(f"paper-d128-{a}:paper-d128-{b}" for a, b in (
        ("bimsa", "sa"), ("sa_nsa", "sa"), ("bna", "sa"), ("bna", "sa_nsa"), ("bna", "bimsa"))), "--seeds", "1", "2"],
     "paper_d128_ablation.jsonl"),                                   # the paper's Tables 3-4 at width 128, two seeds
    ("peers/paired", [*(f"{a}:{b}" for a, b in (
        ("paper-d128-b32-bna", "paper-d128-b32-sa"), ("paper-d128-b32-bna", "paper-d128-bna"),
        ("paper-d128-b32-sa", "paper-d128-sa"), ("paper-d128-b32-bna", "bna-converged"))), "--seeds", "1", "2"],
     "paper_d128_batch.jsonl"),                                      # the paper's shape at the small shape's batch
])
def test_the_parse_comparisons_rescore_to_their_committed_lines(capsys, script, args, jsonl):
    load_experiment(script).main(args)
    committed = [json.loads(line) for line in (RESULTS / "peers" / jsonl).read_text().splitlines()]
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


@needs(str(ptb.PTB_SUBDIR / "wsj_0199.mrg"))
def test_a_resumed_supar_run_is_summarised_from_its_own_log(tmp_path):
    summary = load_experiment("peers/converged_summary")
    run = tmp_path / "supar-run" / "crf-char-converge-s1"
    run.mkdir(parents=True)
    # SuPar 1.1.4's log lines (parser.py): two processes, the second resumed at epoch 2 and stopped after epoch 3
    (run / "train.out").write_text(
        "05:00:00 INFO \n--------------------+-------------------------------\n"
        "threads              |               2               \n"
        "05:00:00 INFO Loading the data\n05:00:01 INFO Epoch 1 / 1000:\n"
        "06:00:00 INFO Loading the data\n06:00:01 INFO Epoch 2 / 1000:\n06:03:00 INFO Epoch 3 / 1000:\n"
        "07:00:00 INFO Epoch 2 saved\n"
        "07:00:00 INFO dev: UCM: 10.00% LCM: 10.00% UP: 80.00% UR: 80.00% UF: 80.00% LP: 78.50% LR: 78.00% LF: 78.25%\n"
        "07:00:00 INFO 1 day, 0:07:30.000000s elapsed, 0:02:30.500000s/epoch\n"
        "\tUser time (seconds): 100.5\n\tSystem time (seconds): 2.5\n")
    results = tmp_path / "results"
    (results / "peers").mkdir(parents=True)
    (results / "peers" / "supar-converged-s1.test.txt").write_bytes((RESULTS / "peers" / "supar.test.txt").read_bytes())
    summary.RESULTS = results
    line = summary.supar_run(tmp_path, 1)
    assert (line["epochs"], line["best_epoch"], line["best_dev_f1"]) == (3, 2, 78.25)
    assert (line["supar_epoch_seconds"], line["supar_elapsed_seconds"]) == (150.5, 86400 + 450.0)
    assert (line["cpu_seconds"], line["cpu_seconds_epochs"]) == (103.0, [2, 3])
    assert line["test_f1"] == 74.6  # the committed 12-epoch parse, rescored
    assert line["threads"] == 2 and line["command"] == "SUPAR_THREADS=2 bash experiments/run_peers.sh supar-converge 1"
    assert summary.supar_run(tmp_path, 2) is None  # no such run: nothing to summarise


def test_a_converged_run_trained_elsewhere_keeps_its_committed_line(tmp_path, capsys):
    summary = load_experiment("peers/converged_summary")
    summary.main([str(tmp_path)])  # an empty peers folder: every run's folder is elsewhere
    committed = [json.loads(line) for line in (RESULTS / "peers" / "converged_runs.jsonl").read_text().splitlines()]
    assert _lines(capsys) == committed


@pytest.mark.parametrize("args, jsonl", [([], "converged_runs.jsonl"), (["--minilm"], "minilm_runs.jsonl"),
                                         (["--ablations"], "ablations.jsonl"),
                                         (["--paper"], "paper_d128_runs.jsonl")])
def test_each_comparison_keeps_the_committed_lines_of_runs_trained_elsewhere(tmp_path, capsys, args, jsonl):
    summary = load_experiment("peers/converged_summary")
    summary.main([*args, str(tmp_path)])
    committed = [json.loads(line) for line in (RESULTS / "peers" / jsonl).read_text().splitlines()]
    assert _lines(capsys) == committed


@needs(str(ptb.PTB_SUBDIR / "wsj_0199.mrg"))
def test_a_minilm_run_is_summarised_under_its_own_names(tmp_path):
    summary = load_experiment("peers/converged_summary")
    run = tmp_path / "bna-run" / "minilm-ft-sa-s2"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"epochs_completed": 9, "best_epoch": 4, "best_dev_f1": 88.5,
                                                  "wall_seconds": 10.0}))
    Path(f"{run}.log").write_text("\tUser time (seconds): 40.0\n\tSystem time (seconds): 2.0\n")
    results = tmp_path / "results"
    (results / "peers").mkdir(parents=True)
    (results / "peers" / "sa-minilm-ft-s2.test.trees").write_bytes(
        (RESULTS / "peers" / "bna-minilm-ft-s1.test.trees").read_bytes())
    summary.RESULTS = results
    kind, names = summary.SETTINGS["minilm"].runs[1]
    line = kind(tmp_path, 2, **names)
    assert (line["run"], line["epochs"], line["best_epoch"], line["cpu_seconds"]) == ("sa-minilm-ft-s2", 9, 4, 42.0)
    assert line["test_f1"] == 90.56 and line["command"] == "bash experiments/run_peers.sh bna-minilm-ft sa 2"


@needs(str(ptb.PTB_SUBDIR / "wsj_0199.mrg"))
def test_a_missing_parse_is_named_by_its_path_in_the_repository(tmp_path, capsys):
    compare = load_experiment("peers/supar_vs_bna")
    compare.RESULTS = tmp_path / "results"  # no committed parse at all
    compare.main(["--converged"])
    missing = [line["missing"] for line in _lines(capsys) if "missing" in line]
    assert missing == [f"results/peers/supar-converged-s{s}.test.txt" for s in (1, 2)] + \
        [f"results/peers/bna-converged-s{s}.test.trees" for s in (1, 2)]


def test_the_plan_in_lane_hours_is_what_its_script_makes_of_the_committed_costs(capsys):
    """Both tables of PEERS.md's plan come from results/peers/epoch_cost.jsonl by lane_hours.py, line for line."""
    peers_md = (RESULTS / "PEERS.md").read_text(encoding="utf-8")
    script = load_experiment("peers/lane_hours")
    costs = str(RESULTS / "peers" / "epoch_cost.jsonl")
    for argv in (["--costs", costs, "--costs-table"], ["--costs", costs, "--width", "384"]):
        script.main(argv)
        table = capsys.readouterr().out
        assert table.count("\n") > 3 and table in peers_md


def test_a_plan_without_a_measured_run_names_it(tmp_path):
    costs = tmp_path / "costs.jsonl"
    costs.write_text(json.dumps({"name": "supar-minilm", "cpu_s_per_epoch": 100.0, "parameters": 1}) + "\n")
    with pytest.raises(SystemExit, match="minilm-ft-bna: no line in the costs file"):
        load_experiment("peers/lane_hours").main(["--costs", str(costs)])
