"""Old module paths keep working for one release: they give the new module and warn, naming the new path."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from structattn._moved import MOVED, ModuleMovedWarning


@pytest.mark.parametrize("old", ["structattn.modeling", "structattn.chart_parser", "structattn.train.nmt_training"])
def test_old_path_gives_the_new_module_with_a_warning(old):
    import importlib

    sys.modules.pop(old, None)
    with pytest.warns(ModuleMovedWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_every_new_path_exists_and_no_old_path_does():
    import importlib.util
    from pathlib import Path

    import structattn

    root = Path(structattn.__file__).parent
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        rel = Path(*old.split(".")[1:])
        assert not rel.with_suffix(".py").exists() and not (root / rel).with_suffix(".py").exists(), old


def test_from_import_of_an_old_module_name_works():
    sys.modules.pop("structattn.sgnet", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModuleMovedWarning)
        from structattn.sgnet import SGNetModel  # noqa: F401
        from structattn.sgnet.model import SGNetModel as new
    assert SGNetModel is new


def test_python_dash_m_on_an_old_path_runs_the_new_module():
    out = subprocess.run([sys.executable, "-m", "structattn.analysis.nmt_report", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--results-dir" in out.stdout
    assert "structattn.translation.report" in out.stderr  # the warning names the new module


def test_the_sgnet_package_forwards_only_the_model_modules_own_names():
    """Libraries probe modules for names (torch's inductor asks for ``torch``): what ``structattn.sgnet.model``
    merely imports is absent from the package, without a warning; its own names resolve, with one."""
    import structattn.sgnet as sgnet

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not hasattr(sgnet, "torch") and not hasattr(sgnet, "nn") and not hasattr(sgnet, "_head")
    with pytest.warns(ModuleMovedWarning, match=r"structattn\.sgnet\.model\.SGNetConfig"):
        from structattn.sgnet.model import SGNetConfig

        assert sgnet.SGNetConfig is SGNetConfig
