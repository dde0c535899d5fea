"""Load a script of experiments/ as a module, for the tests of its functions."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_experiment(name: str) -> ModuleType:
    """``experiments/<name>.py`` imported as ``experiments_<name>`` (``name`` may name a subfolder: ``peers/x``)."""
    spec = importlib.util.spec_from_file_location(f"experiments_{name.replace('/', '_')}",
                                                  ROOT / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
