"""experiments/run_reading_experiments.sh reader-comparison: the CPU reader, then baseline and SG-Net on its
encoder, seeds 1-3, on two lanes. Run in a copy of the recipe whose every step is already recorded, it must find
each run under the names the comparison is recorded by (READER_ENC of experiments/recipe.sh), train nothing and
fail nothing."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _recorded(path: Path, runs: list[str]) -> None:
    path.write_text("".join(json.dumps({"run": run, "f1": 60.0}) + "\n" for run in runs))


def test_the_comparison_finds_every_recorded_step_by_the_reader_s_names(tmp_path):
    (tmp_path / "experiments").mkdir()
    for script in ("run_reading_experiments.sh", "recipe.sh"):
        shutil.copy(EXPERIMENTS / script, tmp_path / "experiments" / script)
    reader = tmp_path / "runs" / "reading" / "reader-x-s1"
    reader.mkdir(parents=True)
    (reader / "trainer_state.json").write_text(json.dumps({"finished": True}))
    (tmp_path / "results").mkdir()
    _recorded(tmp_path / "results" / "squad11.jsonl", ["squad11-reader-x-s1"])
    pairs = [f"squad2-xenc-{variant}-s{seed}" for variant in ("baseline", "sgnet") for seed in (1, 2, 3)]
    _recorded(tmp_path / "results" / "squad2.jsonl", ["squad2-reader-x-s1", *pairs])
    # BIN names no program: any step the recipe did not find recorded would fail and say FAILED
    done = subprocess.run(["bash", "experiments/run_reading_experiments.sh", "reader-comparison"], cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "READER_RUN": "reader-x", "BIN": str(tmp_path / "no-bin")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "FAILED" not in done.stdout + done.stderr, done.stdout + done.stderr
    skipped = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("skip ")}
    assert skipped == {"squad11-reader-x-s1", "squad2-reader-x-s1", *pairs}
