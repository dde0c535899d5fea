"""SG-Net (Zhang et al. 2020): a syntax-guided layer on top of the encoder, for span QA (SQuAD), multiple choice
(RACE, MCTest) and sentence tasks.

- ``layer``: the syntax-guided layer (SDOI-masked self-attention and its aggregation with the encoder's states);
- ``model``: the encoder, the layer and the task heads; ``loading``: building it from a pretrained encoder;
- ``span_qa``: span decoding (best span, null score, no-answer threshold);
- ``reading_features`` / ``multiple_choice_features``: passages, questions and options into features;
- ``reading`` / ``multiple_choice`` / ``sentence``: the families (on the core's
  [`EncoderFamily`][structattn.train.encoder_family.EncoderFamily]);
- ``reader`` / ``reader_packing``: a trained reader by name, and its packed form; ``report``: the results tables.
"""


def __getattr__(name):
    """``structattn.sgnet`` was the SG-Net model module before 0.2.0: its names still resolve, with a
    `ModuleMovedWarning` naming [`structattn.sgnet.model`][structattn.sgnet.model]."""
    import importlib
    import inspect
    import warnings

    from .._moved import ModuleMovedWarning

    model = importlib.import_module(f"{__name__}.model")
    value = getattr(model, name, None)
    # only the model module's own names (its classes, functions and upper-case constants), not what it imports:
    # libraries probe modules for names such as ``torch``, and those must stay absent here, without a warning
    own = getattr(value, "__module__", None) == model.__name__ or (name.isupper() and not inspect.ismodule(value))
    if name.startswith("_") or value is None or not own:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"structattn.sgnet.{name} has moved to structattn.sgnet.model.{name}; import it from there "
                  "(the old path will be removed in the next release)", ModuleMovedWarning, stacklevel=2)
    return getattr(model, name)
