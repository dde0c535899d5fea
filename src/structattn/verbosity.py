"""How much the library says while it loads a model: quiet unless asked.

Loading a parser, translator or encoder through structattn (`ChartParser.from_pretrained`,
`Translator.load`, [`structattn.from_pretrained`][structattn.models.encoder.from_pretrained],
`SGNetModel.from_pretrained`) runs under `quiet_loading`: transformers' "Loading weights" progress bars and its LOAD
REPORT (the weights a model has that the file has not, e.g. a mechanism's new gates) stay off stderr, and its errors
still show. Ask for them with ``structattn.set_verbose(True)``,
``logging.getLogger("structattn").setLevel(logging.INFO)`` (or DEBUG), the environment variable
``STRUCTATTN_VERBOSE=1``, or ``structattn --verbose COMMAND`` on the command line.
"""
from __future__ import annotations

import contextlib
import logging
import os

_verbose: bool | None = None  # None: decided by the "structattn" logger's level and STRUCTATTN_VERBOSE


def set_verbose(verbose: bool | None) -> None:
    """True: show the libraries' loading output; False: hide it; None: back to the logger level and environment."""
    global _verbose
    _verbose = verbose


def is_verbose() -> bool:
    """Whether loading shows transformers' progress bars and reports (module docstring)."""
    if _verbose is not None:
        return _verbose
    if os.environ.get("STRUCTATTN_VERBOSE", "").strip().lower() in ("1", "true", "yes"):
        return True
    logger = logging.getLogger("structattn")
    return logger.level != logging.NOTSET and logger.level <= logging.INFO


@contextlib.contextmanager
def quiet_loading():
    """Within the block (or the decorated function): transformers logs errors only and shows no progress bar,
    unless `is_verbose`; its settings are restored afterwards."""
    if is_verbose():
        yield
        return
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
