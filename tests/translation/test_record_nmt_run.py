"""experiments/record_nmt_run.py on a fabricated run folder: test and dev hypotheses copied and scored, a re-recorded
run keeps its place in nmt.jsonl."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from tasks_testutil import needs  # noqa: E402

from structattn.tasks.bleu import corpus_bleu  # noqa: E402
from structattn.tasks.multi30k import read_split  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "record_nmt_run.py"


def _load_recorder():
    spec = importlib.util.spec_from_file_location("record_nmt_run", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(recorder, run: Path, name: str, results: Path) -> None:
    """Record into the temporary results folder (every path given, so nothing reaches the repository's)."""
    recorder.record(run, name, results=results / "nmt.jsonl", outputs=results / "nmt", root=results.parent)


def _run_dir(tmp: Path, splits: list[str], tests: list[str]) -> Path:
    """A finished run: summary.json naming ``tests`` and hypotheses (the references, every 4th line cut short)."""
    run = tmp / "run"
    (run / "hypotheses").mkdir(parents=True)
    for split in splits:
        refs = read_split(split).targets
        hyps = [" ".join(r.split()[:2]) if i % 4 == 0 else r for i, r in enumerate(refs)]
        (run / "hypotheses" / f"{split}.de").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    summary = {"variant": "hybrid_gate", "seed": 1, "config": {"k": 2, "output_dir": "x"},
               "tests": {s: {} for s in tests}, "dev_bleu_beam": {"best": 1.0}}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return run


@needs("multi30k/raw/val.de")
def test_records_dev_and_replaces_in_place(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    recorder = _load_recorder()
    (results / "nmt.jsonl").write_text('{"run": "a"}\n{"run": "b"}\n{"run": "c"}\n', encoding="utf-8")
    run = _run_dir(tmp_path, ["test2016", "dev"], ["test2016"])
    _record(recorder, run, "b", results)
    lines = [json.loads(ln) for ln in (results / "nmt.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [ln["run"] for ln in lines] == ["a", "b", "c"]  # replaced where it was
    line = lines[1]
    for split in ("test2016", "dev"):
        path = results.parent / line[f"hypotheses_{split}"]
        assert path == results / "nmt" / f"b.{split}.de"
        hyps = path.read_text(encoding="utf-8").split("\n")[:-1]
        assert line[f"bleu_{split}"] == round(corpus_bleu(hyps, read_split(split).targets)["bleu"], 2)
    assert line["bleu_dev"] < 100 and line["mechanism_options"] == {"k": 2} and "output_dir" not in line["config"]
    _record(recorder, _run_dir(tmp_path / "again", ["test2016"], ["test2016"]), "d", results)  # no dev file: no dev fields
    last = json.loads((results / "nmt.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert last["run"] == "d" and "bleu_dev" not in last and "hypotheses_dev" not in last
