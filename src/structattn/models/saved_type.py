"""The saved type of a structure-aware model: its config saves as ``model_type: structattn``.

A model with a mechanism carries a *marked* config: an instance of a subclass of its own config class
(``BertConfig`` ...) that behaves exactly like it in memory and writes ``"model_type": "structattn"`` to
``config.json``, the base type kept as `BASE_TYPE_KEY`. transformers' Auto classes then never load such a
folder as the stock model: [`structattn.models.auto`][structattn.models.auto] teaches them the type once ``structattn``
is imported, and without that transformers refuses the folder.
"""
from __future__ import annotations

import json
from typing import Any, Callable

#: the ``model_type`` written to a structure-aware model's ``config.json``
MODEL_TYPE = "structattn"
#: the key that keeps the encoder's own ``model_type`` (``bert``, ``marian`` ...)
BASE_TYPE_KEY = "structattn_base_model_type"
#: config keys of models the Auto classes cannot rebuild -> the loader that can
REFUSED_KEYS = {
    "structattn_sgnet": "an SG-Net model (a syntax-guided layer on top of the encoder): load it with "
                        "structattn.Reader.from_pretrained(folder) or "
                        "structattn.sgnet.model.SGNetModel.from_pretrained",
    "residual_scale": "a translation model with DeepNet residual weights: load it with "
                      "structattn.Translator.from_pretrained(folder)",
}
MARKED: dict[type, type] = {}   # base config class -> its marked subclass
#: called with each new marked class (the Auto classes register a loader for it)
NEW_CLASS_LISTENERS: list[Callable[[type], None]] = []


def _to_saved_json(text: str) -> str:
    """Rewrite a config's JSON text: ``model_type`` becomes ``structattn``, the base type is kept beside it."""
    data = json.loads(text)
    data[BASE_TYPE_KEY] = data.get("model_type")
    data["model_type"] = MODEL_TYPE
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _rebuild_marked(base: type, state: dict):
    """Unpickle a marked config (its class is made at run time, so pickle stores the base class instead)."""
    config = base.__new__(base)
    config.__dict__.update(state)
    return mark(config)


def marked_class(base: type) -> type:
    """The marked subclass of config class ``base`` (made once per class; registered with the Auto classes)."""
    if base in MARKED.values():
        return base
    if base not in MARKED:
        def to_json_string(self, use_diff: bool = True) -> str:
            return _to_saved_json(base.to_json_string(self, use_diff=use_diff))

        def __reduce__(self):
            return _rebuild_marked, (base, dict(self.__dict__))

        MARKED[base] = type(f"Structattn{base.__name__}", (base,),
                             {"to_json_string": to_json_string, "__reduce__": __reduce__,
                              "__module__": __name__, "__doc__": f"{base.__name__} of a structure-aware model."})
        for listener in NEW_CLASS_LISTENERS:
            listener(MARKED[base])
    return MARKED[base]


def mark(config):
    """Mark ``config`` (in place, returned) as a structure-aware model's: it saves as ``model_type: structattn``."""
    config.__class__ = marked_class(type(config))
    return config


def unmark(config):
    """Undo [`mark`][structattn.models.saved_type.mark] (in place, returned): the config saves as its base type
    again."""
    for base, marked in MARKED.items():
        if type(config) is marked:
            config.__class__ = base
    return config


def base_class_of(config) -> type:
    """The config's own transformers class (``BertConfig`` ...), marked or not."""
    return next((base for base, marked in MARKED.items() if type(config) is marked), type(config))


def refusal(config_dict: dict, where: str) -> str | None:
    """The one-line refusal for a saved config the Auto classes cannot rebuild, or None (an SG-Net baseline,
    aggregation ``none``, is the encoder and its head under transformers' names: the Auto classes rebuild it)."""
    for key, what in REFUSED_KEYS.items():
        value = config_dict.get(key)
        if value is not None and not (isinstance(value, dict) and value.get("aggregation") == "none"):
            return f"{where} holds {what}"
    return None


def base_config_from_dict(config_dict: dict, **kwargs: Any):
    """The encoder's own config class instance (marked) from a saved structure-aware ``config.json`` dict.

    Returns what ``from_dict`` returns (the config, or ``(config, unused_kwargs)`` when asked for)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from ..errors import UserError

    config_dict = dict(config_dict)
    base_type = config_dict.pop(BASE_TYPE_KEY, None)
    if base_type is None or base_type == MODEL_TYPE:
        raise UserError(f"this config.json has model_type {MODEL_TYPE!r} but no {BASE_TYPE_KEY!r}: it was not "
                        "written by structattn; save the model again with structattn")
    config_dict["model_type"] = base_type
    result = CONFIG_MAPPING[base_type].from_dict(config_dict, **kwargs)
    config = result[0] if isinstance(result, tuple) else result
    mark(config)
    return result
