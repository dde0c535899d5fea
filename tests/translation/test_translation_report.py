"""The translation report on a fabricated results folder: re-scoring, Table 1, the figures' sections."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from tasks_testutil import needs  # noqa: E402

from structattn.translation import report as translation_report  # noqa: E402
from structattn.tasks.bleu import corpus_bleu  # noqa: E402
from structattn.tasks.multi30k import TEST_SPLITS, read_split  # noqa: E402


def _write_run(results: Path, name: str, variant: str, seed: int, drop_every: int, dev: bool = False,
               **extra) -> None:
    """A recorded run whose hypotheses are the references with the last word dropped from every
    ``drop_every``-th line; ``dev``: dev hypotheses too (Figure 2's column)."""
    line = {"task": "multi30k", "variant": variant, "seed": seed, "run": name, "dev_bleu_beam": {"best": 30.0},
            "target_tokens_per_second": 1000.0, "model": {"mechanism_parameters": 256}, **extra}
    for split in [*TEST_SPLITS, *(["dev"] if dev else [])]:
        refs = read_split(split).targets
        hyps = [" ".join(r.split()[:-1]) if i % drop_every == 0 else r for i, r in enumerate(refs)]
        path = results / "nmt" / f"{name}.{split}.de"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
        line[f"bleu_{split}"] = round(corpus_bleu(hyps, refs)["bleu"], 2)
        line[f"hypotheses_{split}"] = f"{results.name}/nmt/{name}.{split}.de"
    with open(results / "nmt.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


@needs("multi30k/raw/test_2016_flickr.de")
@pytest.mark.slow
def test_report_rescores_and_writes_the_tables(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    _write_run(results, "t-s1", "transformer", 1, 2)
    _write_run(results, "h-s1", "hybrid_gate", 1, 5)
    _write_run(results, "l-s1", "local", 1, 7)
    _write_run(results, "h-m2-s1", "hybrid_gate", 1, 3, dev=True, mechanism_options={"k": 2})
    _write_run(results, "t-s2", "transformer", 2, 3)
    _write_run(results, "h-s2", "hybrid_gate", 2, 4)
    _write_run(results, "h-all-s1", "hybrid_gate", 1, 6, mechanism_options={"layers": 4})
    gates = {"lowest_layer": 0, "layers": {"0": 0.4, "1": 0.3}, "pos": {"NOUN": {"mean": 0.35, "pieces": 10},
                                                                       "DET": {"mean": 0.5, "pieces": 4}}}
    (results / "nmt_gates").mkdir()
    for run in ("h-s1", "h-m2-s1"):
        (results / "nmt_gates" / f"{run}.json").write_text(json.dumps(gates))
    every_layer = {**gates, "layers": {"0": 0.6, "1": 0.5, "2": 0.45, "3": 0.4}}
    (results / "nmt_gates" / "h-all-s1.json").write_text(json.dumps(every_layer))
    (results / "probing").mkdir()
    for name, accuracy in (("t-s1", 70.0), ("untrained-t", 55.0)):
        tasks = {t: {"test_accuracy": accuracy, "majority_test_accuracy": 50.0, "sizes": {"test": 10}}
                 for t in ("SeLn", "WC", "BShif")}
        (results / "probing" / f"{name}.json").write_text(json.dumps({"tasks": tasks}))
    assert translation_report.main(["--results-dir", str(results)]) == 0
    text = (results / "NMT.md").read_text(encoding="utf-8")
    assert "| t-s1 | 70.00 | 70.00 | – |" in text  # Table 3: Surf., Sync. (BShif alone), no semantic task
    assert "| untrained-t (random weights) | 55.0 | 55.0 | – | – | 55.0 |" in text  # Table 4, control row
    assert "| TRANSFORMER | 1,2 |" in text and "+ HYBRID (Gate)" in text
    delta = float(text.split("| + HYBRID (Gate) | 1,2 |")[1].split("|")[2])  # Δ: each seed's own transformer
    runs = {json.loads(line)["run"]: json.loads(line) for line in (results / "nmt.jsonl").read_text().splitlines()}
    want = [runs[f"h-s{s}"]["bleu_test2016"] - runs[f"t-s{s}"]["bleu_test2016"] for s in (1, 2)]
    assert delta == pytest.approx(sum(want) / 2, abs=0.011)
    pooled = text.split("Over seeds")[1].split("Per seed")[0]  # one row per variant and test set, seeds 1 and 2
    assert "| hybrid_gate | 1,2 | test2016 | " + f"{delta:+.2f} |" in pooled and "over all 8 variant" in pooled
    assert "h-m2-s1" not in text.split("## Figure 2")[0]  # option runs stay out of Table 1
    assert "| hybrid_gate | 1 | test2016 |" in text and "p (Holm)" in text
    assert (results / "fig_nmt_window.png").is_file() and (results / "fig_nmt_gate_pos.png").is_file()
    assert (results / "fig_nmt_delta.png").is_file() and "![delta](fig_nmt_delta.png)" in text
    assert "| DET | 0.500 | 4 |" in text
    against = text.split("## Gate against the other locality models")[1].split("## Figure 2")[0]
    gate_local = runs["h-s1"]["bleu_test2017"] - runs["l-s1"]["bleu_test2017"]  # seed 1 only: local has no seed 2
    shown = float(against.split("| local | 1 | test2017 | ")[1].split(" |")[0])  # unrounded BLEUs' Δ, rounded
    assert shown == pytest.approx(gate_local, abs=0.011) and "over these 4 cells" in against
    assert "hybrid_concat" not in against  # no concat run: no rows against it
    window = text.split("## Figure 2")[1].split("## Figure 3")[0]
    dev = runs["h-m2-s1"]["bleu_dev"]  # re-scored from its dev hypotheses; h-s1 has none: its record, starred
    assert dev != 30.0 and f"| 2 | `h-m2-s1` | {dev:.2f} | " in window and "| 1 | `h-s1` | 30.00* | " in window
    assert "| 0.400 | 0.300 |" in window and "h-all-s1" not in window
    assert "against m = 1 (`h-s1`)" in window and "over these 4 comparisons" in window
    m2 = runs["h-m2-s1"]["bleu_test2018"] - runs["h-s1"]["bleu_test2018"]
    assert f"| h-m2-s1 | test2018 | {m2:+.2f} | " in window
    layers = text.split("## Figure 3")[1].split("## Figure 4")[0]
    assert "| mean gate | 0.600 | 0.500 | 0.450 | 0.400 |" in layers
    assert "against the lowest two (`h-s1`)" in layers and "| h-all-s1 | mscoco2017 | " in layers
    assert (results / "fig_nmt_gate_layers.png").is_file()


@needs("multi30k/raw/test_2016_flickr.de")
def test_a_recorded_bleu_that_the_file_does_not_give_is_refused(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    _write_run(results, "t-s1", "transformer", 1, 2)
    line = json.loads((results / "nmt.jsonl").read_text())
    line["bleu_test2016"] += 1
    (results / "nmt.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match="recorded bleu_test2016"):
        translation_report.main(["--results-dir", str(results)])


@needs("multi30k/raw/test_2016_flickr.de")
def test_committed_runs_are_what_their_hypothesis_files_score():
    """Every committed nmt.jsonl line re-scores from its hypothesis files, one line per source sentence."""
    results = Path(__file__).resolve().parents[2] / "results"
    if not (results / "nmt.jsonl").is_file():
        pytest.skip("no committed translation runs yet")
    references = {split: read_split(split).targets for split in translation_report.SCORED_SPLITS}
    runs = translation_report.load_runs(results, references)  # raises on a recorded BLEU the file does not give
    assert runs
    for run in runs:
        assert run["task"] == "multi30k" and {"variant", "seed"} <= run.keys()
        for split in TEST_SPLITS:
            assert len(run["_hyps"][split]) == len(references[split]), (run["run"], split)
        if "hypotheses_dev" in run:  # the window runs': Figure 2's dev BLEU
            assert len(run["_hyps"]["dev"]) == len(references["dev"]), run["run"]
