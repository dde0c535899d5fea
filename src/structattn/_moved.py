"""Old module paths kept importable for one release: ``import structattn.modeling`` still works, gives
the module's new home (:data:`MOVED`) and warns once with a :class:`ModuleMovedWarning`.

One import hook serves every old path, so no stub files are left behind. ``python -m`` on an old path runs the
new module, so recorded commands such as ``python -m structattn.analysis.nmt_report`` still work.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings

#: old module path -> new module path (the reorganisation into models/, integrations/ and one word per family)
MOVED: dict[str, str] = {
    "structattn.modeling": "structattn.models.encoder",
    "structattn.sgnet": "structattn.models.sgnet",
    "structattn.chart_parser": "structattn.models.parser",
    "structattn.translator": "structattn.models.translator",
    "structattn.spacy_component": "structattn.integrations.spacy_component",
    "structattn.ptb_text": "structattn.parsing.ptb_text",
    "structattn.provenance": "structattn.train.provenance",
    "structattn.train.qa_training": "structattn.train.reading",
    "structattn.train.qa_data": "structattn.train.reading_data",
    "structattn.train.mc_training": "structattn.train.multiple_choice",
    "structattn.train.mc_data": "structattn.train.multiple_choice_data",
    "structattn.train.nmt_training": "structattn.train.translation",
    "structattn.train.nmt_data": "structattn.heads.translation",
    "structattn.train.chart_training": "structattn.train.parsing",
    "structattn.train.probe_training": "structattn.train.probing",
    "structattn.analysis.nmt_report": "structattn.analysis.translation_report",
    "structattn.analysis.nmt_gates": "structattn.analysis.translation_gates",
    "structattn.commands.train_nmt": "structattn.commands.train_translation",
    "structattn.commands.train_parser": "structattn.commands.train_parsing",
}


class ModuleMovedWarning(DeprecationWarning):
    """An old module path was imported; the message names the new one. Shown by default (see
    :func:`install`), unlike plain DeprecationWarnings, so users of the old paths see it."""


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        warnings.warn(f"{spec.name} has moved to {self.new}; import it from there "
                      "(the old path will be removed in the next release)", ModuleMovedWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        """The new module is already executed: nothing to run."""

    def get_code(self, fullname: str):
        """For ``python -m OLD``: the code of the new module (runpy runs it as ``__main__``)."""
        warnings.warn(f"{fullname} has moved to {MOVED[fullname]}; run `python -m {MOVED[fullname]}` "
                      "(the old path will be removed in the next release)", ModuleMovedWarning, stacklevel=2)
        spec = importlib.util.find_spec(MOVED[fullname])
        return spec.loader.get_code(spec.name)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        target = importlib.util.find_spec(new)  # its file, so `python -m OLD` sets sys.argv[0] as usual
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(new), origin=target.origin if target else None)


def install() -> None:
    """Put the old-path finder on ``sys.meta_path`` (once) and show :class:`ModuleMovedWarning` by default."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
        warnings.filterwarnings("default", category=ModuleMovedWarning)
