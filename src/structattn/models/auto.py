"""Saved structure-aware models and transformers' Auto classes: load with the mechanism, or refuse; never stock.

A model with a mechanism (``structattn.from_pretrained``, ``apply_mechanism``) saves as ``model_type: structattn``
([`structattn.models.saved_type`][structattn.models.saved_type]). So a folder saved from it

* loads through ``AutoConfig`` / ``AutoModel*`` once ``structattn`` is imported, as ``structattn.from_pretrained``
  loads it (same mechanism, same gates, same outputs): the ``structattn`` type is registered with ``AutoConfig`` as
  `StructattnConfig`, and each Auto class of `structattn.models.encoder.TASKS` gets a loader;
* fails loudly in a process that has not imported ``structattn`` (transformers does not know the type), instead
  of loading the stock model and dropping the gates and the structure mask without a word.

Folders that the Auto classes cannot rebuild (an SG-Net model: a syntax-guided layer on top of the encoder; a
translation model with DeepNet residual weights, which need forward hooks) are refused in one line that names the
loader that can.

The registration runs when transformers' Auto modules are imported after ``structattn`` (an import hook,
[`install_import_hook`][structattn.models.auto.install_import_hook]), or at once when they were imported first;
importing ``structattn`` itself imports neither torch nor transformers.
"""
from __future__ import annotations

import importlib.abc
import sys
from typing import Any

from .saved_type import MARKED, MODEL_TYPE, NEW_CLASS_LISTENERS, base_config_from_dict, refusal

#: transformers' Auto modules, each registered with right after its import
_AUTO_MODULES = ("transformers.models.auto.configuration_auto", "transformers.models.auto.modeling_auto")
_registered = {"config": False, "models": False}


def _config_class():
    from transformers import PretrainedConfig

    class StructattnConfig(PretrainedConfig):
        """What ``AutoConfig`` finds for ``model_type: structattn``: it builds the encoder's own config class,
        marked ([`base_config_from_dict`][structattn.models.saved_type.base_config_from_dict]), so the config in memory
        is a ``BertConfig`` (...) as before."""

        model_type = MODEL_TYPE

        @classmethod
        def from_dict(cls, config_dict: dict, **kwargs: Any):
            return base_config_from_dict(config_dict, **kwargs)

    StructattnConfig.__module__ = __name__
    return StructattnConfig


def _loader(auto_name: str, task: str, config_class: type) -> type:
    """The class an Auto class finds for a marked config: loading goes through ``structattn.from_pretrained``."""
    from ..errors import UserError

    def from_pretrained(cls, name_or_path, *model_args, config=None, **kwargs):
        from .encoder import from_pretrained as load

        if model_args:
            raise UserError(f"{auto_name}.from_pretrained on a structattn model takes keyword arguments only")
        refused = refusal(vars(config) if config is not None else {}, str(name_or_path))
        if refused:
            raise UserError(f"{refused} ({auto_name} cannot rebuild it)")
        for key in ("_from_auto", "trust_remote_code", "adapter_kwargs", "code_revision"):
            kwargs.pop(key, None)
        if config is not None:
            kwargs["config"] = config   # it holds what the Auto class read into it (num_labels=... and the like)
        return load(str(name_or_path), task=task, **kwargs)

    def from_config(cls, config, **kwargs):
        from .encoder import model_from_config

        return model_from_config(config, task=task, **kwargs)

    return type(f"{auto_name}ForStructattn", (), {
        "config_class": config_class, "__module__": __name__,
        "__doc__": f"What {auto_name} loads for a structure-aware model: structattn.from_pretrained(task={task!r}).",
        "from_pretrained": classmethod(from_pretrained), "_from_config": classmethod(from_config),
        "from_config": classmethod(from_config)})


def _register_loaders(config_class: type) -> None:
    import transformers

    from .encoder import TASKS

    for task, auto_name in TASKS.items():
        getattr(transformers, auto_name).register(config_class, _loader(auto_name, task, config_class), exist_ok=True)


def _register_config() -> None:
    from transformers.models.auto.configuration_auto import AutoConfig

    if not _registered["config"]:
        _registered["config"] = True
        AutoConfig.register(MODEL_TYPE, _config_class(), exist_ok=True)


def _register_models() -> None:
    if not _registered["models"]:
        _registered["models"] = True
        NEW_CLASS_LISTENERS.append(_register_loaders)
        for marked in list(MARKED.values()):
            _register_loaders(marked)


#: what each of transformers' Auto modules needs registered once it is imported
_AFTER_IMPORT = {_AUTO_MODULES[0]: _register_config, _AUTO_MODULES[1]: _register_models}


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Registers with each of transformers' Auto modules right after it is imported."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _AFTER_IMPORT:
            return None
        # the spec the other finders give (a plain, zipped or editable install of transformers alike)
        spec = next((found for finder in sys.meta_path if finder is not self and hasattr(finder, "find_spec")
                     for found in [finder.find_spec(fullname, path, target)] if found is not None), None)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _AFTER_IMPORT[fullname]()

        spec.loader.exec_module = exec_then_register
        return spec


def install_import_hook() -> None:
    """Register with transformers' Auto modules that are loaded, and with the others once they are (cheap:
    imports nothing)."""
    for name, register_with in _AFTER_IMPORT.items():
        if name in sys.modules:
            register_with()
    if not any(isinstance(f, _RegisterAfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())
