"""Helpers of the command tests: the command line as users call it, and prediction files."""
from __future__ import annotations

import json

import pytest

from structattn.cli import main


@pytest.fixture
def cli(capsys):
    """argv -> (exit code, stdout, stderr) of ``structattn ARGV``."""
    def call(argv: list[str]) -> tuple[int, str, str]:
        code = main(argv)
        out = capsys.readouterr()
        return code, out.out, out.err
    return call


@pytest.fixture
def json_file(tmp_path):
    """obj -> the path (str) of ``pred.json`` in the test's tmp_path, holding ``obj`` as JSON."""
    def write(obj) -> str:
        path = tmp_path / "pred.json"
        path.write_text(json.dumps(obj), encoding="utf-8")
        return str(path)
    return write
