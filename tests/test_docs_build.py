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


# ------------------------------------------------------------------------------------------------ the API reference
def _api_modules() -> list[str]:
    import re

    return re.findall(r"^::: (\S+)", "".join(p.read_text(encoding="utf-8")
                                            for p in sorted((ROOT / "docs" / "api").glob("*.md"))), re.M)


def _documented_members(cls) -> list[str]:
    """The public methods and properties of ``cls`` defined in it without a docstring (mkdocstrings hides them)."""
    import inspect

    missing = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        func = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if isinstance(value, property) and not value.__doc__ or inspect.isfunction(func) and not func.__doc__:
            missing.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    return missing


def test_the_api_reference_lists_every_public_object():
    """Every name structattn exports, the loaders and the spaCy pieces are in a module the reference renders,
    and the classes a user loads document every public method and property (undocumented ones are not shown)."""
    import structattn
    from structattn.bna.model import ChartParser
    from structattn.bna.spacy_component import ChartParserComponent
    from structattn.dependency.record import Parse
    from structattn.dependency.spacy_backend import SpacyParser
    from structattn.models.trained import TrainedModel
    from structattn.sgnet.reader import Answer, Reader, Reading
    from structattn.translation.translator import Translator

    modules = set(_api_modules())
    exported = [getattr(structattn, name) for name in structattn.__all__]
    loaded = [Reader, Reading, Answer, Translator, ChartParser, SpacyParser, ChartParserComponent, Parse,
              TrainedModel]
    unlisted = [f"{obj.__module__}.{getattr(obj, '__qualname__', obj)}" for obj in exported + loaded
                if hasattr(obj, "__module__") and obj.__module__ not in modules]
    assert not unlisted, f"not in docs/api: {unlisted}"
    assert "structattn.attention.mechanisms" in modules and structattn.MECHANISMS  # a registry: rendered with it
    missing = [m for cls in loaded + [o for o in exported if isinstance(o, type)] for m in _documented_members(cls)]
    assert not missing, f"no docstring, so not in the API reference: {missing}"


def test_docstrings_use_markdown_links_not_sphinx_roles():
    """mkdocstrings renders `[text][module.name]` links; a Sphinx role (:class:`X`) would show as literal text."""
    import re

    role = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const):`")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "src").rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if role.search(line)]
    assert not found, f"Sphinx roles: {found[:10]}"


def test_the_index_names_every_shipped_model():
    from structattn.models.trained import TRAINED

    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert [name for name in TRAINED if f"`{name}`" not in index] == []
