"""The whole path on tiny data: parse -> structures -> windows -> model with SLA -> metric -> saved model."""
import json

import pytest

from fixtures import make_tiny_model, make_tiny_sst2
from structattn.cli import main

pytestmark = pytest.mark.slow

CONLL = """-DOCSTART- -X- -X- O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
visits VBZ B-VP O
Paris NNP B-NP B-LOC
. . O O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    data = make_tiny_sst2(tmp_path / "data", n_train=32, n_dev=16)
    (data / "conll2003").mkdir()
    for split in ("train.txt", "valid.txt", "test.txt"):
        (data / "conll2003" / split).write_text(CONLL * 4, encoding="utf-8")
    monkeypatch.setenv("STRUCTATTN_DATA", str(data))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    return tmp_path, make_tiny_model(tmp_path / "model")


def test_sla_classification_train_evaluate_predict(env, capsys):
    tmp, model = env
    out = tmp / "run"
    assert main(["train", "--task", "sst2", "--model", str(model), "--mechanism", "sla", "--m", "3",
                 "--output-dir", str(out), "--epochs", "1", "--batch-size", "8", "--eval-every", "2",
                 "--max-length", "32", "--stride", "8"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert 0.0 <= summary["best"] <= 1.0 and summary["steps"] == 4
    gates = summary["best_metrics"]["gate_means"]
    assert len(gates) == 2 and all(0.0 < g < 1.0 for g in gates)  # one mean gate per layer
    saved = json.loads((out / "best" / "config.json").read_text())
    assert saved["structattn"]["name"] == "sla"

    assert main(["evaluate", "--model", str(out / "best"), "--split", "dev"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["accuracy"] == pytest.approx(summary["best_metrics"]["accuracy"])
    assert ev["gate_means"] == pytest.approx(gates, abs=1e-5)  # the same model, the same dev set
    preds = tmp / "preds.jsonl"
    assert main(["predict", "--model", str(out / "best"), "--split", "dev", "--output", str(preds)]) == 0
    lines = [json.loads(l) for l in preds.read_text().splitlines()]
    assert len(lines) == 16 and {l["prediction"] for l in lines} <= {"0", "1"}


def test_tagging_with_lisa_maps_labels_back_to_words(env, capsys):
    tmp, model = env
    out = tmp / "ner"
    assert main(["train", "--task", "conll2003", "--model", str(model), "--mechanism", "wla", "--k", "1",
                 "--lisa-weight", "0.5", "--output-dir", str(out), "--epochs", "1", "--batch-size", "4",
                 "--max-length", "32", "--stride", "8", "--eval-every", "0"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["main_metric"] == "f1" and summary["lisa_weight"] == 0.5
    assert 0.0 <= summary["best_metrics"]["lisa_parent_accuracy"] <= 1.0  # the supervised head, measured on dev
    preds = tmp / "p.jsonl"
    assert main(["predict", "--model", str(out / "best"), "--split", "test", "--output", str(preds)]) == 0
    first = json.loads(preds.read_text().splitlines()[0])
    assert len(first["prediction"]) == len(first["words"]) == 5


def test_model_folder_without_weights_is_a_clear_error(env, capsys, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "train_config.json").write_text("{}")
    assert main(["evaluate", "--model", str(folder)]) == 2
    assert "no model weights" in capsys.readouterr().err


def test_an_output_dir_is_not_resumed_with_other_settings(env, capsys):
    tmp, model = env
    out = tmp / "run"
    args = ["train", "--task", "sst2", "--model", str(model), "--output-dir", str(out), "--epochs", "1",
            "--batch-size", "8", "--eval-every", "2", "--max-length", "32", "--stride", "8"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    # another seed in the same folder would silently return (or continue) the first run: refused, naming the key
    assert main(args + ["--seed", "7"]) == 2
    err = capsys.readouterr().err
    assert "seed: 42 -> 7" in err and "--output-dir" in err
    assert json.loads((out / "train_config.json").read_text())["seed"] == 42  # nothing overwritten
    # settings that do not change the computation may differ
    assert main(args + ["--eval-batch-size", "16"]) == 0
    assert json.loads(capsys.readouterr().out)["best"] == first["best"]


def test_training_from_a_model_folder_without_weights_is_a_clear_error(env, capsys):
    tmp, model = env
    for weights in model.glob("*.safetensors"):
        weights.unlink()
    out = tmp / "run"
    assert main(["train", "--task", "sst2", "--model", str(model), "--output-dir", str(out), "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert f"cannot load a model from {str(model)!r}" in err and "model.safetensors" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_sweep_appends_one_line_per_run_seed_major_and_skips_finished_runs(env, capsys):
    tmp, model = env
    args = ["sweep", "--task", "sst2", "--model", str(model), "--variants", "global", "sla:m=2", "--seeds", "1", "2",
            "--max-steps", "1", "--epochs", "1", "--batch-size", "8", "--max-length", "32", "--stride", "8",
            "--results-dir", str(tmp / "results"), "--run-root", str(tmp / "runs"), "--group-by-length", "true"]
    assert main(args) == 0
    lines = [json.loads(l) for l in (tmp / "results" / "sst2.jsonl").read_text().splitlines()]
    assert [(r["seed"], r["label"]) for r in lines] == [(1, "baseline"), (1, "SLA (m=2)"),
                                                        (2, "baseline"), (2, "SLA (m=2)")]
    assert all(r["group_by_length"] and r["command"] == "structattn " + " ".join(args) for r in lines)
    assert all(0.0 <= r["best"] <= 1.0 for r in lines)
    assert sorted(p.name for p in (tmp / "runs").iterdir())[0] == "sst2-global-lr3e-05-ep1.0-s1-grouped"
    capsys.readouterr()
    assert main(args) == 0  # everything done: nothing trained, nothing appended
    assert len((tmp / "results" / "sst2.jsonl").read_text().splitlines()) == 4
    assert capsys.readouterr().err.count("skip (already in") == 4
