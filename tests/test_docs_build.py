"""The documentation site builds with `mkdocs build --strict`: a broken link, a page missing from the navigation or
an API reference (mkdocstrings `::: module`) that does not resolve fails the suite, as it fails `make docs`."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MISSING = [name for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
           if importlib.util.find_spec(name.split(".")[0]) is None
           or (name.count(".") and importlib.util.find_spec(name) is None)]


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason=f"the docs extra is not installed (missing: {', '.join(MISSING)}); "
                                         "pip install -e '.[docs]'")
def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "api" / "models" / "index.html").exists()
