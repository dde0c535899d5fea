"""The trainers of the reading tasks end to end on tiny data and a tiny random BERT: span QA (SQuAD-format files)
and multiple choice (RACE layout), baseline and SG-Net, train -> best/ -> evaluate / predict -> score; and the
``sgnet`` variant of the sentence runner. Parses are real (spaCy, offline), cached in tmp."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fixtures import make_tiny_model, point_at, tiny_race, tiny_squad11
from structattn.cli import main as cli_main
from structattn.errors import UserError
from structattn.trainers import load_trained
from structattn.commands.predict import side_files
from structattn.tasks.squad_eval import evaluate
from structattn.run_config import RunConfig
from structattn.trainers import task_family, trainer_for

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("reading")
    data = root / "data"
    tiny_squad11(data)
    tiny_race(data)
    return {"model": make_tiny_model(root / "model"), "data": data, "cache": root / "cache", "root": root}


@pytest.fixture
def env(tiny, monkeypatch):
    return point_at(tiny, monkeypatch)


def config(tiny, task, name, **kw) -> RunConfig:
    base = dict(task=task, model=str(tiny["model"]), max_length=64, stride=16, batch_size=4, eval_batch_size=8,
                max_steps=3, eval_every=0, learning_rate=1e-3, output_dir=str(tiny["root"] / "runs" / name))
    return RunConfig(**{**base, **kw})


def test_task_families_and_unknown_task():
    assert [task_family(t) for t in ("sst2", "squad2", "squad11", "race_m", "mctest500")] == \
        ["sentence", "span_qa", "span_qa", "multiple_choice", "multiple_choice"]
    from structattn.errors import UserError

    with pytest.raises(UserError, match="unknown task 'squad3'.*mctest500.*squad2"):
        task_family("squad3")


@pytest.mark.parametrize("sgnet", ["none", "dual"])
def test_span_qa_trains_saves_and_predicts_what_the_scorer_scores(env, sgnet, capsys):
    cfg = config(env, "squad11", f"qa-{sgnet}", sgnet=sgnet)
    summary = trainer_for(cfg, show_progress=False).train()
    assert summary["main_metric"] == "f1" and summary["best_step"] == 3
    best = Path(cfg.output_dir) / "best"
    saved = json.loads((best / "span_qa.json").read_text())
    assert saved["max_answer_length"] == 30 and saved["na_threshold"] is None  # 1.1: never answer ""
    assert (json.loads((best / "config.json").read_text())["structattn_sgnet"]["aggregation"] == sgnet)

    out = env["root"] / f"pred-{sgnet}.json"
    data = env["data"] / "squad11" / "dev-v1.1.reconstructed-from-explorer.json"
    assert cli_main(["predict", "--model", str(best), "--input", str(data), "--output", str(out)]) == 0
    preds = json.loads(out.read_text())
    na_file, nbest_file = side_files(out)
    assert set(preds) == set(json.loads(na_file.read_text())) == set(json.loads(nbest_file.read_text()))
    assert all(text for text in preds.values())  # no threshold: every question answered
    scores = evaluate(json.loads(data.read_text()), preds)
    assert scores["total"] == 12
    # The dev evaluation during training is the same decoding on the same questions.
    trainer = load_trained(str(best))
    assert trainer.evaluate(*trainer.features("dev"))["f1"] == pytest.approx(scores["f1"])
    capsys.readouterr()
    assert cli_main(["score", "squad", "--gold", str(data), "--predictions", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["f1"] == pytest.approx(scores["f1"])


def test_span_qa_limits_count_questions_and_the_scorer_sees_exactly_those(env):
    trainer = trainer_for(config(env, "squad11", "qa-limit"), show_progress=False)
    data, feats = trainer.features("dev", limit=5)
    assert len(data.questions) == 5 and {f["example_index"] for f in feats} == set(range(5))
    assert sum(len(p["qas"]) for a in data.dataset["data"] for p in a["paragraphs"]) == 5
    metrics = trainer.evaluate(data, feats)
    assert metrics["total"] == 5 and math.isfinite(metrics["f1"])


def test_sgnet_qa_batches_carry_the_sdoi_mask(env):
    trainer = trainer_for(config(env, "squad11", "qa-mask", sgnet="dual"), show_progress=False)
    _, feats = trainer.features("dev", limit=3)
    batch = trainer.collator()(feats)
    assert batch["sg_mask"].shape[1:] == batch["sg_mask"].shape[1:2] * 2
    assert bool(batch["sg_tokens"][:, 0].any()) is False  # [CLS] keeps the encoder output (footnote 9)
    assert "structure_mask" not in batch  # plain attention inside the encoder


@pytest.mark.parametrize("sgnet, pool", [("none", "first"), ("dual", "first"), ("dual", "mean")])
def test_multiple_choice_trains_and_scores_accuracy(env, sgnet, pool):
    cfg = config(env, "race_m", f"mc-{sgnet}-{pool}", sgnet=sgnet, pool=pool, max_length=96)
    trainer = trainer_for(cfg, show_progress=False)
    if sgnet != "none":  # [CLS] pooled: its row sees every token and is aggregated; mean pooled: the paper's rules
        batch = trainer.collator()(trainer.features("dev", limit=2)[1])
        assert batch["sg_mask"].shape[:2] == (2, 4) and bool(batch["sg_tokens"][..., 0].all()) == (pool == "first")
    summary = trainer.train()
    assert summary["main_metric"] == "accuracy"
    trainer = load_trained(str(Path(cfg.output_dir) / "best"))
    examples, feats = trainer.features("test")
    metrics = trainer.evaluate(examples, feats)
    assert metrics["total"] == 8 and 0.0 <= metrics["accuracy"] <= 1.0
    assert trainer.option_scores(feats).shape == (8, 4)
    # `predict --output X.json`: {qid: letter}, what `score race` reads, with the options' scores beside it
    from structattn.tasks.race import score_race

    out = Path(cfg.output_dir) / "test_pred.json"
    assert cli_main(["predict", "--model", str(Path(cfg.output_dir) / "best"), "--split", "test", "--output", str(out)]) == 0
    letters = json.loads(out.read_text())
    assert len(letters) == 8 and set(letters.values()) <= set("ABCD")
    assert score_race(examples.questions, letters)["accuracy"] == pytest.approx(100 * metrics["accuracy"])
    assert json.loads(out.with_name("test_pred.scores.json").read_text()).keys() == letters.keys()


def test_sgnet_multiple_choice_features_are_one_build_equal_to_two(env):
    """Plain attention inside the encoder: the inputs are built once, with the SG layer's SDOI structures, and
    equal a build without structures plus a separate SDOI build."""
    import numpy as np

    from structattn.sgnet.multiple_choice_features import build_mc_features
    from structattn.sgnet.loading import sg_structure_spec

    trainer = trainer_for(config(env, "race_m", "mc-one-build", sgnet="dual", pool="option", max_length=96),
                          show_progress=False)
    examples, feats = trainer.features("dev", limit=3)
    plain = build_mc_features(examples.questions, trainer.tokenizer, None, max_length=96, show_progress=False)
    sdoi = build_mc_features(examples.questions, trainer.tokenizer, sg_structure_spec("multiple_choice", "option"),
                             max_length=96, show_progress=False)
    for f, p, s in zip(feats, plain, sdoi):
        for o, po, so in zip(f["options"], p["options"], s["options"]):
            assert o["structure"] is None and po["structure"] is None
            assert np.array_equal(o["input_ids"], po["input_ids"]) and np.array_equal(o["token_word"], po["token_word"])
            assert np.array_equal(o["sg_structure"].parents, so["structure"].parents)
            assert o["option_words"] == po["option_words"]


def test_a_span_qa_model_given_to_multiple_choice_lends_its_encoder(env, capsys):
    """Intermediate-task transfer: a SQuAD run's best/ as --model of a RACE run keeps the encoder's trained
    weights; the SG layer and the multiple-choice head are new."""
    import torch
    from safetensors.torch import load_file

    from structattn.errors import UserError

    qa = config(env, "squad11", "transfer-qa", sgnet="dual")
    trainer_for(qa, show_progress=False).train()
    qa_best = Path(qa.output_dir) / "best"
    qa_weights = load_file(str(qa_best / "model.safetensors"))
    mc = config(env, "race_m", "transfer-mc", model=str(qa_best), sgnet="none", pool="mean", max_length=96)
    trainer = trainer_for(mc, show_progress=False)
    assert "its encoder (global attention) is kept" in capsys.readouterr().out
    model = trainer.model
    assert model.config.head == "multiple_choice" and model.sgnet is None and model.training
    encoder = {k: v for k, v in model.state_dict().items() if k.startswith("bert.")}
    assert encoder and all(torch.equal(v, qa_weights[k]) for k, v in encoder.items())  # the QA run's encoder
    assert not any(k.startswith(("classifier", "pooler")) for k in qa_weights)  # the head was not in the QA model
    summary = trainer.train()
    assert summary["main_metric"] == "accuracy"
    # Its best/ loads back: the QA encoder was saved without BERT's pooler, the head owns a fresh one.
    best = Path(mc.output_dir) / "best"
    saved = load_file(str(best / "model.safetensors"))
    assert any(k.startswith("pooler.") for k in saved) and not any(k.startswith("bert.pooler.") for k in saved)
    state = load_trained(str(best)).model.state_dict()
    assert set(state) == set(saved) and all(torch.equal(state[k], saved[k]) for k in saved)
    with pytest.raises(UserError, match="keeps its mechanism: pass --mechanism global"):
        trainer_for(config(env, "race_m", "transfer-wla", model=str(qa_best), mechanism="wla", k=1),
                    show_progress=False)
    with pytest.raises(UserError, match="has k=None; this run asks for k=2"):
        trainer_for(config(env, "race_m", "transfer-k", model=str(qa_best), k=2), show_progress=False)


def test_model_parts_encoder_gives_a_readers_encoder_to_sgnet_with_fresh_heads(env, capsys):
    """--model-parts encoder: SG-Net (and the baseline) on a trained reader's encoder, the SG part and the span
    head fresh; a reader loaded whole must keep its --sgnet."""
    import torch
    from safetensors.torch import load_file

    from structattn.errors import UserError

    qa = config(env, "squad11", "parts-qa")
    trainer_for(qa, show_progress=False).train()
    best = Path(qa.output_dir) / "best"
    saved = load_file(str(best / "model.safetensors"))
    for sgnet in ("dual", "none"):
        capsys.readouterr()
        trainer = trainer_for(config(env, "squad11", f"parts-{sgnet}", model=str(best), model_parts="encoder",
                                     sgnet=sgnet), show_progress=False)
        assert "its encoder (global attention) is kept" in capsys.readouterr().out
        state = trainer.model.state_dict()
        encoder = {k: v for k, v in state.items() if k.startswith("bert.")}
        assert encoder and all(torch.equal(v, saved[k]) for k, v in encoder.items())
        heads = [k for k in state if k.startswith("qa_outputs")]
        assert heads and not all(torch.equal(state[k], saved[k]) for k in heads)  # the span head is new
        assert (sgnet == "dual") == any(k.startswith("sgnet.") for k in state)
        trainer.train()
        run_best = Path(trainer.cfg.output_dir) / "best"
        reloaded = load_trained(str(run_best)).model.state_dict()  # what predict and record load: the run's own
        trained = load_file(str(run_best / "model.safetensors"))
        assert set(trained) <= set(reloaded) and all(torch.equal(reloaded[k], trained[k]) for k in trained)
    with pytest.raises(UserError, match="saved with --sgnet none; this run asks for --sgnet dual"):
        trainer_for(config(env, "squad11", "parts-mismatch", model=str(best), sgnet="dual"), show_progress=False)
    with pytest.raises(UserError, match="is not one"):
        trainer_for(config(env, "squad11", "parts-plain", model_parts="encoder"), show_progress=False)


def test_sentence_runner_sgnet_variant_trains(tmp_path, monkeypatch):
    import dataclasses

    from fixtures import make_tiny_sst2

    from structattn.finetuning.trainer import Trainer
    from structattn.sgnet.sentence import SGNetSentenceTrainer

    data = make_tiny_sst2(tmp_path / "data", n_train=16, n_dev=8)
    monkeypatch.setenv("STRUCTATTN_DATA", str(data))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    model = make_tiny_model(tmp_path / "model")
    cfg = RunConfig(task="sst2", model=str(model), sgnet="dual", max_steps=2, eval_every=0, batch_size=8,
                      output_dir=str(tmp_path / "run"))
    trainer = trainer_for(cfg, show_progress=False)
    assert type(trainer) is SGNetSentenceTrainer  # the sentence trainer itself knows nothing of SG-Net
    plain = trainer_for(dataclasses.replace(cfg, sgnet="none", output_dir=str(tmp_path / "plain")), show_progress=False)
    assert type(plain) is Trainer and "sg_mask" not in plain.collator()(plain.features("dev")[1])
    batch = trainer.collator()(trainer.features("dev")[1])
    assert batch["sg_tokens"][:, 0].all()  # pooled head: [CLS] row sees the words, its SG output is used
    summary = trainer.train()
    assert "accuracy" in summary["best_metrics"]
    assert json.loads((tmp_path / "run" / "best" / "config.json").read_text())["structattn_sgnet"]["head"] == \
        "classification"


def test_span_qa_trains_in_bf16_and_refuses_fp16_on_cpu(env):
    import torch

    from structattn.errors import UserError

    summary = trainer_for(config(env, "squad11", "qa-bf16", precision="bf16"), show_progress=False).train()
    assert summary["steps"] == 3 and math.isfinite(summary["best"])
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="--precision fp16 needs a CUDA GPU.*use --precision bf16"):
            trainer_for(config(env, "squad11", "qa-fp16", precision="fp16"), show_progress=False).train()


def test_predict_na_threshold(env, capsys):
    cfg = config(env, "squad11", "qa-threshold")
    trainer_for(cfg, show_progress=False).train()
    best = str(Path(cfg.output_dir) / "best")
    out = env["root"] / "threshold.json"
    for value, empty in (("never", 0), ("-1e9", 12)):   # never "no answer"; "no answer" whatever the scores
        assert cli_main(["predict", "--model", best, "--task", "squad11", "--split", "dev", f"--na-threshold={value}",
                         "--output", str(out)]) == 0
        assert sum(text == "" for text in json.loads(out.read_text()).values()) == empty
    assert cli_main(["predict", "--model", best, "--task", "squad11", "--split", "dev", "--output", str(out)]) == 0
    assert "squad11 has no unanswerable questions: every question gets an answer" in capsys.readouterr().err
    assert cli_main(["predict", "--model", best, "--na-threshold", "high", "--output", str(out)]) == 2
    assert "--na-threshold takes a number or 'never', not 'high'" in capsys.readouterr().err


def _recorder():
    """experiments/record.py, loaded as a module."""
    import importlib.util
    import sys

    script = Path(__file__).resolve().parents[2] / "experiments" / "record.py"
    spec = importlib.util.spec_from_file_location("experiments_record", script)
    recorder = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = recorder   # its dataclasses look their module up
    spec.loader.exec_module(recorder)
    return recorder


def test_record_reading_run_scores_the_file_it_commits_and_keeps_the_dev_curve(env, tmp_path, capsys):
    cfg = config(env, "squad11", "qa-recorded", max_steps=4, eval_every=2)
    trainer_for(cfg, show_progress=False).train()
    recorder = _recorder()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "squad11.jsonl").write_text('{"run": "other"}\n')
    for _ in range(2):                         # a second recording replaces the line, in place
        recorder.main(["reading", cfg.output_dir, "tiny-s1"], root=tmp_path)   # not the repository's results
    lines = [json.loads(x) for x in (tmp_path / "results" / "squad11.jsonl").read_text().splitlines()]
    assert [x["run"] for x in lines] == ["other", "tiny-s1"]
    line = lines[1]
    dataset = json.loads((env["data"] / "squad11" / "dev-v1.1.reconstructed-from-explorer.json").read_text())
    committed = json.loads((tmp_path / line["predictions"]).read_text())
    assert line["f1"] == pytest.approx(evaluate(dataset, committed)["f1"]) and len(committed) == 12
    assert [p["step"] for p in line["dev_curve"]] == [2, 4]
    assert set(line["dev_curve"][0]) == {"step", "elapsed_s", "train_loss", "f1", "HasAns_f1"}
    assert line["dev"]["f1"] == line["dev_curve"][[2, 4].index(line["best_step"])]["f1"]
    assert "tiny-s1: test f1" in capsys.readouterr().out


def test_a_stopped_runs_dev_curve_is_read_from_its_log():
    """experiments/record.py reading --stopped-log: the trainer's evaluation lines after the progress bar (as a time-boxed
    GPU run left them, carriage returns and all) -> history, best step, last update and planned total."""
    recorder = _recorder()
    log = ("race_m/dev: 129 of 1,436 questions longer than 384 tokens\n"
           "race_m global:   0%|          | 0/3178 [00:00<?, ?it/s]\r"
           "race_m global:   9%|9         | 300/3178 [00:36<06:15,  7.66it/s]race_m global step 300: dev accuracy "
           "0.415 (best 0.415 at step 300), train loss 1.3537\n"
           "race_m global:  28%|##8       | 899/3178 [01:53<04:26,  8.56it/s]race_m global step 900: dev accuracy "
           "0.4944 (best 0.4944 at step 900), train loss 1.2304\n"
           "race_m global:  38%|###8      | 1199/3178 [1:02:26<02:46, 11.86it/s]race_m global step 1,200: dev "
           "accuracy 0.4916 (best 0.4944 at step 900)\n"
           "race_m global:  85%|########4 | 2689/3178 [04:53<00:34, 14.10it/s]stopped (exit 124)\n")
    state = recorder.state_from_log(log)
    assert state["history"] == [
        {"step": 300, "elapsed_s": 36.0, "accuracy": 0.415, "train_loss": 1.3537},
        {"step": 900, "elapsed_s": 113.0, "accuracy": 0.4944, "train_loss": 1.2304},
        {"step": 1200, "elapsed_s": 3746.0, "accuracy": 0.4916}]
    assert (state["best_step"], state["step"], state["planned_steps"], state["finished"]) == (900, 2689, 3178, False)
    with pytest.raises(UserError, match="no evaluation lines"):
        recorder.state_from_log("race_m global:   9%| 300/3178 [00:36<06:15]\n")
