"""The reading report re-scores committed prediction files, refuses a recorded figure that differs, and writes
the tables and Figure 4 (tiny SQuAD 1.1-like and RACE-like data; predictions written by hand)."""
from __future__ import annotations

import json

import pytest

from fixtures import tiny_race, tiny_squad11
from structattn.sgnet.report import main as report_main
from structattn.tasks.multiple_choice import get_mc_task
from structattn.tasks.race import score_race
from structattn.tasks.squad import get_qa_task
from structattn.tasks.squad_eval import evaluate


@pytest.fixture
def results(tmp_path, monkeypatch):
    data = tmp_path / "data"
    tiny_squad11(data)
    tiny_race(data)
    monkeypatch.setenv("STRUCTATTN_DATA", str(data))
    results = tmp_path / "repo" / "results"
    (results / "squad11").mkdir(parents=True)
    (results / "race").mkdir()
    dataset = get_qa_task("squad11").read("test").dataset
    golds = {qa["id"]: qa["answers"][0]["text"] for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]}
    lines = []
    for variant in ("baseline", "sgnet"):
        for seed in (1, 2):
            # baseline answers every other question right, SG-Net all but one (seed 2) or all (seed 1)
            preds = {q: (g if (variant == "sgnet" and (seed == 1 or i)) or i % 2 == 0 else "nothing")
                     for i, (q, g) in enumerate(golds.items())}
            path = results / "squad11" / f"{variant}-s{seed}.json"
            path.write_text(json.dumps(preds))
            scores = evaluate(dataset, preds)
            everything = results / "squad11" / f"{variant}-s{seed}.answer_all.json"
            everything.write_text(json.dumps(preds))  # squad11: every question answerable, nothing answered ""
            lines.append({"run": f"{variant}-s{seed}", "variant": variant, "seed": seed, "exact": scores["exact"],
                          "f1": scores["f1"], "predictions": f"results/squad11/{variant}-s{seed}.json",
                          "answer_all": {"HasAns_exact": scores["HasAns_exact"], "HasAns_f1": scores["HasAns_f1"],
                                         "predictions": f"results/squad11/{variant}-s{seed}.answer_all.json"}})
    (results / "squad11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    questions = get_mc_task("race_m").read("test")
    mc = []
    for variant in ("baseline", "sgnet"):
        letters = {q.qid: "ABCD"[q.label if variant == "sgnet" else 0] for q in questions}
        path = results / "race" / f"{variant}-s1.json"
        path.write_text(json.dumps(letters))
        acc = score_race(questions, letters)   # percent, as `structattn score race` prints it
        mc.append({"task": "race_m", "run": f"{variant}-s1", "variant": variant, "seed": 1, **acc,
                   "predictions": f"results/race/{variant}-s1.json"})
    (results / "race.jsonl").write_text("".join(json.dumps(x) + "\n" for x in mc))
    return results


def test_report_writes_tables_and_figure(results):
    assert report_main(["--results-dir", str(results)]) == 0
    text = (results / "READING.md").read_text()
    assert "| baseline | 1, 2 | 50.00, 50.00 |" in text
    assert "sgnet, seed 1: Δ F1 +50.00" in text and "Welch" in text
    assert "Span extraction alone" in text and "sgnet, seed 1: Δ HasAns F1 +50.00" in text
    assert "Table 3 layout" in text and "+ dual contextual attention (SG-Net)" in text
    assert (results / "fig_squad11_question_length.png").stat().st_size > 1000
    assert "## race_m: test accuracy" in text and "| sgnet | 1 | 100.00 |" in text


def test_report_refuses_a_recorded_figure_the_file_does_not_give(results):
    lines = (results / "squad11.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["f1"] += 0.5
    (results / "squad11.jsonl").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    with pytest.raises(ValueError, match="baseline-s1: recorded f1"):
        report_main(["--results-dir", str(results)])


def test_committed_squad2_results_are_what_their_files_score():
    """Every committed SQuAD 2.0 line re-scores from its prediction files (the report refuses a mismatch)."""
    from pathlib import Path

    from structattn.sgnet.report import load_span_runs
    from structattn.settings import data_dir_candidate

    results = Path(__file__).resolve().parents[2] / "results"
    if not (data_dir_candidate() / "squad2").is_dir():
        pytest.skip(f"data not found: {data_dir_candidate() / 'squad2'} (set STRUCTATTN_DATA to the shared data folder)")
    if not (results / "squad2.jsonl").is_file():
        pytest.skip("no committed SQuAD 2.0 runs yet")
    runs, _ = load_span_runs(results, "squad2")
    assert runs and all(len(run["_f1"]) == 4173 for run in runs)


@pytest.mark.parametrize("name, data", [("race", "race"), ("mctest", "mctest")])
def test_committed_multiple_choice_results_are_what_their_files_score(name, data):
    """Every committed RACE / MCTest line re-scores from its option letters (the report refuses a mismatch)."""
    from pathlib import Path

    from structattn.sgnet.report import load_mc_runs
    from structattn.settings import data_dir_candidate

    results = Path(__file__).resolve().parents[2] / "results"
    if not (data_dir_candidate() / data).is_dir():
        pytest.skip(f"data not found: {data_dir_candidate() / data} (set STRUCTATTN_DATA to the shared data folder)")
    if not (results / f"{name}.jsonl").is_file():
        pytest.skip(f"no committed {name} runs yet")
    by_task = load_mc_runs(results, name)
    assert by_task and all(len(run["_correct"]) > 0 for runs in by_task.values() for run in runs)


def test_runs_trained_on_other_data_get_their_own_section(results):
    lines = [json.loads(x) for x in (results / "squad11.jsonl").read_text().splitlines()]
    for line in lines:
        line["config"] = {"task": "squad2_plus11" if line["seed"] == 2 else "squad11"}
    (results / "squad11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert report_main(["--results-dir", str(results)]) == 0
    text = (results / "READING.md").read_text()
    bigger = text.index("trained on SQuAD 1.1 train + the squad2 train part")
    own = text.index("trained on SQuAD 1.1 train; float32\n")
    assert bigger < own                                  # the larger training set first
    assert "| baseline | 2 |" in text[bigger:own] and "| baseline | 1 |" not in text[bigger:own]
    assert "| baseline | 1 |" in text[own:]             # seeds of one training set never meet the other's
    assert (results / "fig_squad11_from_squad2_plus11_question_length.png").is_file()


def test_runs_on_a_readers_encoder_are_their_own_group():
    from structattn.sgnet.report import describe_training, training_groups, training_key

    runs = [{"run": "a", "config": {"task": "squad2"}},
            {"run": "b", "config": {"task": "squad2", "model_parts": "encoder", "model": "runs/reading/r-gpu/best"}},
            {"run": "c", "config": {"task": "squad2", "model_parts": "all"}},
            {"run": "d", "config": {"task": "squad2_plus11"}}, {"run": "e"},
            {"run": "f", "config": {"task": "squad2_plus11"}, "train_device": "NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130)"},
            {"run": "g", "config": {"task": "squad2", "model_parts": "encoder", "model": "/elsewhere/r-cpu"}}]
    assert [training_key(r) for r in runs] == ["squad2:fp32", "squad2_on_r-gpu:fp32", "squad2:fp32",
                                               "squad2_plus11:fp32", None, "squad2_plus11@nvidia:fp32",
                                               "squad2_on_r-cpu:fp32"]
    # a model path on another machine says nothing: the line's encoder_from names the reader
    assert training_key({"config": {"task": "race_m", "model_parts": "encoder", "model": "/tmp/sa/reader"},
                         "encoder_from": "r-cpu"}) == "race_m_on_r-cpu:fp32"
    assert [(key, [r["run"] for r in group]) for key, group in training_groups(runs)] == \
        [("squad2_plus11:fp32", ["d"]), ("squad2_plus11@nvidia:fp32", ["f"]), ("squad2:fp32", ["a", "c"]),
         ("squad2_on_r-cpu:fp32", ["g"]), ("squad2_on_r-gpu:fp32", ["b"]), (None, ["e"])]
    assert describe_training("squad2_on_r-gpu:fp32").startswith("the encoder of the saved reader r-gpu")
    assert describe_training("squad2_plus11@nvidia:bf16") == describe_training("squad2_plus11")


def test_a_float32_and_a_bf16_reader_of_one_seed_are_two_trainings():
    from structattn.sgnet.report import (PRECISION_WORDS, _training_title, figure_tag, training_base,
                                         training_groups)

    runs = [{"run": "r-bf16", "config": {"task": "squad2_plus11", "precision": "bf16"}, "device": "cpu (AMD EPYC)"},
            {"run": "r-fp32", "config": {"task": "squad2_plus11", "precision": "fp32"}, "device": "cpu (AMD EPYC)"},
            {"run": "r-old", "config": {"task": "squad2_plus11"}, "device": "cpu (AMD EPYC)"}]
    groups = training_groups(runs)
    assert [(key, [r["run"] for r in group]) for key, group in groups] == \
        [("squad2_plus11:bf16", ["r-bf16"]), ("squad2_plus11:fp32", ["r-fp32", "r-old"])]
    assert {training_base(key) for key, _ in groups} == {"squad2_plus11"}
    titles = [_training_title("## squad2", "squad2", group, key, {}) for key, group in groups]
    assert [t.rpartition("; ")[2] for t in titles] == [PRECISION_WORDS["bf16"], PRECISION_WORDS["fp32"]]
    # one figure file per group: the precision named where it is not the default fp32
    assert [figure_tag("squad2", key) for key, _ in groups] == ["squad2_plus11_bf16", "squad2_plus11"]
    assert figure_tag("squad11", "squad2_plus11@nvidia:bf16") == "squad11_from_squad2_plus11_nvidia_bf16"
    assert figure_tag("squad2", "squad2:fp32") == figure_tag("squad2", None) == "squad2"


def test_two_runs_of_one_variant_and_seed_in_one_training_are_refused(results):
    lines = [dict(json.loads(x), config={"task": "squad11"})
             for x in (results / "squad11.jsonl").read_text().splitlines()]
    twin = dict(lines[0], run=lines[0]["run"] + "-twin")
    (results / "squad11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines + [twin]))
    with pytest.raises(ValueError, match="both baseline seed 1 of the same training"):
        report_main(["--results-dir", str(results)])
    twin["train_device"] = "NVIDIA H200"            # trained elsewhere: its own group, both reported
    (results / "squad11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines + [twin]))
    assert report_main(["--results-dir", str(results)]) == 0
    assert "; trained on NVIDIA H200; float32\n" in (results / "READING.md").read_text()
    del twin["train_device"]
    twin["config"] = {"task": "squad11", "precision": "bf16"}   # another precision: its own group too
    (results / "squad11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines + [twin]))
    assert report_main(["--results-dir", str(results)]) == 0
    assert "trained on SQuAD 1.1 train; bf16 autocast\n" in (results / "READING.md").read_text()


def test_a_group_without_a_baseline_is_compared_with_the_vanilla_layer(results):
    """Table 3 rows run on their own (no baseline in their group): Δ and p against "+ vanilla attention only", the
    control with the SG layer's parameters; a one-row group gets no Table 3."""
    lines = [json.loads(x) for x in (results / "squad11.jsonl").read_text().splitlines()]
    renamed = {"baseline": "sgnet:agg=vanilla", "sgnet": "sgnet:agg=sg_only"}
    ablation = [dict(x, variant=renamed[x["variant"]], run="abl-" + x["run"],
                     config={"task": "squad2", "model_parts": "encoder", "model": "runs/reading/r/best"})
                for x in lines]
    alone = dict(lines[0], config={"task": "squad2_plus11"})     # a reader on its own: one row
    (results / "squad11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in ablation + [alone]))
    assert report_main(["--results-dir", str(results)]) == 0
    text = (results / "READING.md").read_text()
    assert "## squad11: dev set (10,570 questions" in text
    assert "Against sgnet:agg=vanilla (this group has no baseline) of the same seed" in text
    assert "sgnet:agg=sg_only, seed 1: Δ F1 +50.00" in text
    assert "| model | EM | F1 | Δ F1 vs + vanilla attention only |" in text
    assert "| + syntax-guided attention only | 100.00 | 100.00 | +50.00 |" in text
    assert text.count("### Table 3 layout") == 1                  # not for the reader's one row


def test_multiple_choice_runs_on_other_encoders_get_their_own_section(results):
    """Two RACE-M baselines of seed 1 from different encoders (one named by ``encoder_from``, its config's model a
    path on another machine) are two sections, each with its own comparison; a time-boxed run is said to be one."""
    lines = [json.loads(x) for x in (results / "race.jsonl").read_text().splitlines()]
    remote = {"task": "race_m", "model_parts": "encoder", "model": "/tmp/sa/reader"}
    first = [dict(x, config=remote, encoder_from="reader-a") for x in lines]
    second = [dict(x, run=x["run"] + "-b", config=remote, encoder_from="reader-b") for x in lines]
    second[1].update(finished=False, steps=2689, planned_steps=3178, best_step=2400)
    (results / "race.jsonl").write_text("".join(json.dumps(x) + "\n" for x in first + second))
    assert report_main(["--results-dir", str(results)]) == 0
    text = (results / "READING.md").read_text()
    assert text.count("## race_m: test accuracy (%); the encoder of the saved reader reader-") == 2
    assert text.count("sgnet, seed 1: Δ accuracy +") == 2
    assert "sgnet, seed 1: stopped by its wall-clock limit at update 2,689 of 3,178; its test figures are those of the " \
           "model kept at update 2,400" in text
    same = [{k: v for k, v in x.items() if k != "encoder_from"} for x in first + second]  # one training: refused
    (results / "race.jsonl").write_text("".join(json.dumps(x) + "\n" for x in same))
    with pytest.raises(ValueError, match="both baseline seed 1 of the same training"):
        report_main(["--results-dir", str(results)])


def test_a_repository_describes_its_own_readers(results):
    """write_report with a repository's table: its reader's runs come first, under its words, after the intro."""
    from structattn.sgnet.report import TASK_TRAINING, write_report

    lines = [json.loads(x) for x in (results / "squad11.jsonl").read_text().splitlines()]
    for line in lines:
        line["config"] = ({"task": "squad11", "model_parts": "encoder", "model": "runs/reading/my-reader/best"}
                          if line["seed"] == 2 else {"task": "squad11"})
    (results / "squad11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    table = {"squad11_on_my-reader": "the encoder of my reader", **TASK_TRAINING}
    out = write_report(results, "Made by hand.", table)
    text = out.read_text()
    assert text.startswith("# SG-Net: reading comprehension\n\nMade by hand.\n\n")
    mine, own = text.index("; the encoder of my reader"), text.index("; trained on SQuAD 1.1 train; float32\n")
    assert mine < own and "| baseline | 2 |" in text[mine:own]


def test_this_repositorys_report_describes_every_reader_its_committed_runs_started_from():
    """experiments/reading_report.py's table names the training of every committed reading line (none falls back
    to the generic words) and keeps the library's words for the task names it shares with it."""
    import importlib.util
    from pathlib import Path

    from structattn.sgnet.report import TASK_TRAINING, training_base, training_key

    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("reading_report_here", repo / "experiments" / "reading_report.py")
    here = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(here)
    keys = {training_base(str(training_key(json.loads(x))))
            for name in ("squad2", "squad11", "race", "mctest") if (repo / "results" / f"{name}.jsonl").is_file()
            for x in (repo / "results" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()}
    keys.discard("None")
    assert keys and keys <= set(here.TRAINED_ON) | {k for k in keys if "_on_" not in k}
    assert {k: here.TRAINED_ON[k] for k in ("squad2_plus11", "squad11")} == \
        {k: TASK_TRAINING[k] for k in ("squad2_plus11", "squad11")}
