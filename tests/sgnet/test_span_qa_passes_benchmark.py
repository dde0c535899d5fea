"""benchmarks/span_qa_passes.py: one span-QA update as one pass or several, each configuration in its own process
(a tiny shape: the script runs, reports each configuration, and refuses passes that do not divide the batch)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "span_qa_passes.py"


def test_each_configuration_is_timed_in_its_own_process_and_tabled():
    res = subprocess.run([sys.executable, str(SCRIPT), "--batch", "4", "--passes", "1", "2", "--length", "16",
                          "--updates", "1", "--rounds", "1"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [line for line in res.stdout.splitlines() if line.startswith("| 4 x 1 |") or line.startswith("| 2 x 2 |")]
    assert len(rows) == 2 and rows[0].split(" | ")[2] == "1.00x"
    assert all(line.endswith(" GiB |") for line in rows)   # peak RSS, binary units


def test_passes_that_do_not_divide_the_batch_are_refused():
    res = subprocess.run([sys.executable, str(SCRIPT), "--batch", "6", "--passes", "1", "4"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and "is not divisible by every --passes value" in res.stderr
