"""Fixtures for the attention tests (no network, no downloads)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from attn_helpers import random_batch, require_fused  # noqa: E402


@pytest.fixture
def batch():
    return random_batch()


@pytest.fixture(autouse=True)
def _skip_fused_when_unavailable(request):
    """A test parametrized with ``kernel="fused"`` skips (with the reason) where the native kernel is
    unavailable; tests that call the fused kernel otherwise call :func:`attn_helpers.require_fused`."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("kernel") == "fused":
        require_fused()
