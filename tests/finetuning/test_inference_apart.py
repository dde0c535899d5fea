"""``structattn evaluate`` and ``predict`` load a saved folder through the families' inference part: no training
engine, no Accelerator, no output-folder lock; and they give what the trained family itself gives on the same data.
One tiny run per family (sentence task, span QA, multiple choice) on a tiny random BERT."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures import make_tiny_model, make_tiny_sst2, point_at, tiny_race, tiny_squad11
from structattn.cli import main
from structattn.run_config import RunConfig
from structattn.trainers import trainer_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("inference")
    data = make_tiny_sst2(root / "data", n_train=16, n_dev=8)
    tiny_squad11(data)
    tiny_race(data)
    return {"model": make_tiny_model(root / "model"), "data": data, "cache": root / "cache", "root": root}


@pytest.fixture
def env(tiny, monkeypatch):
    return point_at(tiny, monkeypatch)


@pytest.fixture
def training_parts(monkeypatch):
    """Counts every Accelerator, Engine and output lock made from here on."""
    import accelerate

    import structattn.train.engine as engine
    import structattn.train.output_lock as output_lock

    made = {"Accelerator": 0, "Engine": 0, "lock": 0}

    def counting(name, original):
        def made_one(*args, **kwargs):
            made[name] += 1
            return original(*args, **kwargs)
        return made_one

    monkeypatch.setattr(accelerate.Accelerator, "__init__", counting("Accelerator", accelerate.Accelerator.__init__))
    monkeypatch.setattr(engine.Engine, "__init__", counting("Engine", engine.Engine.__init__))
    for module in (output_lock, engine):
        monkeypatch.setattr(module, "hold_output_dir", counting("lock", output_lock.hold_output_dir))
    return made


def trained(env, task: str, **kw):
    """A family trained 3 updates on ``task`` (one evaluation, at the end: best/ holds the final weights)."""
    cfg = RunConfig(**{**dict(task=task, model=str(env["model"]), max_length=64, stride=16, batch_size=4,
                                eval_batch_size=8, max_steps=3, eval_every=0, learning_rate=1e-3,
                                output_dir=str(env["root"] / "runs" / task)), **kw})
    family = trainer_for(cfg, show_progress=False)
    summary = family.train()
    return family, summary, Path(cfg.output_dir) / "best"


def evaluated(best: Path, training_parts: dict, capsys) -> dict:
    """``structattn evaluate`` of ``best`` on dev, with the training parts counted from zero."""
    capsys.readouterr()
    training_parts.update(dict.fromkeys(training_parts, 0))
    assert main(["evaluate", "--model", str(best), "--split", "dev"]) == 0
    return json.loads(capsys.readouterr().out)


def predicted(best: Path, split: str, out: Path) -> str:
    """``structattn predict`` of ``best`` on ``split`` into ``out``; the text of ``out``."""
    assert main(["predict", "--model", str(best), "--split", split, "--output", str(out)]) == 0
    return out.read_text()


def test_a_sentence_model_evaluates_and_predicts_without_the_engine(env, training_parts, capsys, tmp_path):
    family, summary, best = trained(env, "sst2", mechanism="sla", m=3)
    examples, feats = family.features("dev")
    expected = family.predict(feats)
    scores = evaluated(best, training_parts, capsys)
    assert scores["accuracy"] == pytest.approx(summary["best_metrics"]["accuracy"])
    assert scores["gate_means"] == pytest.approx(summary["best_metrics"]["gate_means"], abs=1e-5)
    lines = [json.loads(line) for line in predicted(best, "dev", tmp_path / "preds.jsonl").splitlines()]
    labels = family.label_list
    assert [line["prediction"] for line in lines] == [labels[int(logits.argmax())] for logits in expected]
    assert training_parts == {"Accelerator": 0, "Engine": 0, "lock": 0}


def test_a_span_qa_model_evaluates_and_predicts_without_the_engine(env, training_parts, capsys, tmp_path):
    family, summary, best = trained(env, "squad11", sgnet="dual")
    data, feats = family.features("dev")
    expected, _, _, _ = family.answers(data, feats, threshold=float("inf"))
    scores = evaluated(best, training_parts, capsys)
    assert scores["f1"] == pytest.approx(summary["best_metrics"]["f1"])
    assert json.loads(predicted(best, "dev", tmp_path / "pred.json")) == expected
    assert training_parts == {"Accelerator": 0, "Engine": 0, "lock": 0}


def test_a_multiple_choice_model_evaluates_and_predicts_without_the_engine(env, training_parts, capsys, tmp_path):
    family, summary, best = trained(env, "race_m", sgnet="dual", batch_size=2, grad_accum=1, eval_batch_size=4)
    data, feats = family.features("test")
    expected = family.predict(feats)
    scores = evaluated(best, training_parts, capsys)
    assert scores["accuracy"] == pytest.approx(summary["best_metrics"]["accuracy"])
    letters = json.loads(predicted(best, "test", tmp_path / "pred.json"))
    assert letters == {q.qid: "ABCD"[int(row.argmax())] for q, row in zip(data.questions, expected)}
    scores_file = json.loads((tmp_path / "pred.scores.json").read_text())
    assert [x for q in data.questions for x in scores_file[q.qid]] == pytest.approx(expected.ravel().tolist(),
                                                                                     abs=1e-5)
    assert training_parts == {"Accelerator": 0, "Engine": 0, "lock": 0}
