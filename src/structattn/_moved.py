"""Old module paths kept importable for one release: ``import structattn.modeling`` still works, gives
the module's new home (`MOVED`) and warns once with a `ModuleMovedWarning`.

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

#: old module path -> new module path. Two reorganisations: into models/, integrations/ and one word per family
#: (0.1.0); into one folder per system over a shared core (0.2.0; chains of the first are followed to the end).
MOVED: dict[str, str] = {
    # 0.1.0
    "structattn.modeling": "structattn.models.encoder",
    "structattn.chart_parser": "structattn.bna.model",
    "structattn.translator": "structattn.translation.translator",
    "structattn.spacy_component": "structattn.bna.spacy_component",
    "structattn.ptb_text": "structattn.bna.ptb_text",
    "structattn.provenance": "structattn.train.provenance",
    "structattn.train.qa_training": "structattn.sgnet.reading",
    "structattn.train.qa_data": "structattn.sgnet.reading_features",
    "structattn.train.mc_training": "structattn.sgnet.multiple_choice",
    "structattn.train.mc_data": "structattn.sgnet.multiple_choice_features",
    "structattn.train.nmt_training": "structattn.translation.trainer",
    "structattn.train.nmt_data": "structattn.translation.data",
    "structattn.train.chart_training": "structattn.bna.trainer",
    "structattn.train.probe_training": "structattn.translation.probing",
    "structattn.analysis.nmt_report": "structattn.translation.report",
    "structattn.analysis.nmt_gates": "structattn.translation.gates",
    "structattn.commands.train_nmt": "structattn.commands.train_translation",
    "structattn.commands.train_parser": "structattn.commands.train_parsing",
    # 0.2.0: one folder per system
    "structattn.layers.gaussian": "structattn.attention.gaussian",
    "structattn.layers.multihead": "structattn.attention.multihead",
    "structattn.layers.bimsa": "structattn.bna.bimsa",
    "structattn.heads.chart": "structattn.bna.chart",
    "structattn.layers.fenceposts": "structattn.bna.fenceposts",
    "structattn.models.parser": "structattn.bna.model",
    "structattn.layers.nsa": "structattn.bna.nsa",
    "structattn.parsing.ptb_text": "structattn.bna.ptb_text",
    "structattn.analysis.parsing_report": "structattn.bna.report",
    "structattn.integrations.spacy_component": "structattn.bna.spacy_component",
    "structattn.train.parsing": "structattn.bna.trainer",
    "structattn.layers.transformer_block": "structattn.bna.transformer_block",
    "structattn.layers.word_encoders": "structattn.bna.word_encoders",
    "structattn.parsing": "structattn.dependency",
    "structattn.parsing.cache": "structattn.dependency.cache",
    "structattn.parsing.cache_migration": "structattn.dependency.cache_migration",
    "structattn.parsing.conllu_backend": "structattn.dependency.conllu_backend",
    "structattn.parsing.datasets": "structattn.dependency.datasets",
    "structattn.parsing.ptb_dependency": "structattn.dependency.ptb_dependency",
    "structattn.parsing.record": "structattn.dependency.record",
    "structattn.parsing.spacy_backend": "structattn.dependency.spacy_backend",
    "structattn.train.data": "structattn.finetuning.features",
    "structattn.layers.lisa": "structattn.finetuning.lisa",
    "structattn.train.model_loading": "structattn.finetuning.model_loading",
    "structattn.train.loop": "structattn.finetuning.trainer",
    "structattn.layers.syntax_guided": "structattn.sgnet.layer",
    "structattn.train.sgnet_loading": "structattn.sgnet.loading",
    "structattn.models.sgnet": "structattn.sgnet.model",
    "structattn.train.multiple_choice": "structattn.sgnet.multiple_choice",
    "structattn.train.multiple_choice_data": "structattn.sgnet.multiple_choice_features",
    "structattn.train.reader": "structattn.sgnet.reader",
    "structattn.train.reader_packing": "structattn.sgnet.reader_packing",
    "structattn.train.reading": "structattn.sgnet.reading",
    "structattn.train.reading_data": "structattn.sgnet.reading_features",
    "structattn.analysis.reading_report": "structattn.sgnet.report",
    "structattn.heads.span_qa": "structattn.sgnet.span_qa",
    "structattn.train.sweep": "structattn.sweep",
    "structattn.train.trainers": "structattn.trainers",
    "structattn.heads.translation": "structattn.translation.data",
    "structattn.analysis.translation_gates": "structattn.translation.gates",
    "structattn.models.translation": "structattn.translation.model",
    "structattn.train.probing": "structattn.translation.probing",
    "structattn.analysis.translation_report": "structattn.translation.report",
    "structattn.train.translation": "structattn.translation.trainer",
    "structattn.models.translator": "structattn.translation.translator",
}

#: old packages with no single new home: importable (empty) so that their old modules still resolve
VANISHED_PACKAGES: tuple[str, ...] = ("structattn.heads", "structattn.layers", "structattn.integrations")


class ModuleMovedWarning(DeprecationWarning):
    """An old module path was imported; the message names the new one. Shown by default (see
    `install`), unlike plain DeprecationWarnings, so users of the old paths see it."""


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


class _EmptyPackageLoader(importlib.abc.Loader):
    """An old package that no longer exists, as an empty package, so that ``import OLDPACKAGE.module`` reaches
    the finder (every module of it is in `MOVED`)."""

    def create_module(self, spec):
        return None  # the default module, with spec.submodule_search_locations == [] as its __path__

    def exec_module(self, module) -> None:
        """Nothing in it: its modules are elsewhere."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in VANISHED_PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, _EmptyPackageLoader(), is_package=True)
        new = MOVED.get(fullname)
        if new is None:
            return None
        target = importlib.util.find_spec(new)  # its file, so `python -m OLD` sets sys.argv[0] as usual
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(new), origin=target.origin if target else None)


def install() -> None:
    """Put the old-path finder first on ``sys.meta_path`` (once) and show `ModuleMovedWarning` by default.
    First, because an old package may now be a new one (``structattn.parsing`` is ``structattn.dependency``): the
    path finder would load ``structattn.parsing.record`` from it a second time, as a module of another name."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
        warnings.filterwarnings("default", category=ModuleMovedWarning)
