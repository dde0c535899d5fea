"""Helpers for the task tests: data-folder skips and small files written to tmp_path."""
from __future__ import annotations

from pathlib import Path

import pytest

from structattn.settings import data_dir_candidate

DATA = data_dir_candidate()  # may not exist: the tests that need it skip, naming where they looked


def needs(*relative: str):
    """Skip unless every ``relative`` path exists under the data folder (with the reason why)."""
    missing = [r for r in relative if not (DATA / r).exists()]
    return pytest.mark.skipif(bool(missing), reason=f"data not found: {', '.join(str(DATA / r) for r in missing)} "
                                                     "(set STRUCTATTN_DATA to the shared data folder)")


def write(root: Path, relative: str, content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8, or raw bytes) at ``root / relative``; return the path."""
    path = Path(root) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path
