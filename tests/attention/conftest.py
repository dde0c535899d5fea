"""Fixtures for the attention tests (no network, no downloads)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from attn_helpers import random_batch  # noqa: E402


@pytest.fixture
def batch():
    return random_batch()
