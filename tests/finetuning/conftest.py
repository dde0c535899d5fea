"""The fine-tuning tests train a tiny random BERT on tiny data folders, which the engine's tests build too:
``tests/train/fixtures.py`` is imported by name."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
