"""The sweep report's test runs a tiny sweep on the tiny BERT and SST-2 folder of ``tests/train/fixtures.py``
(imported by name)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
