"""Where a result came from: package version, git commit and the attention kernel that actually ran.

Every results line (``structattn train`` summaries, ``structattn sweep`` JSONL) carries these, so a
reader can tell which code and which kernel produced a figure even after ``kernel="auto"`` fell back.
"""
from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def package_version() -> str:
    """The installed structattn version (``"unknown"`` when the package metadata is missing)."""
    try:
        return metadata.version("structattn")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the checkout the package is imported from, with ``-dirty`` when files differ from it.

    None when the package does not live in a git work tree (an installed wheel) or git is missing.
    """
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(_PACKAGE_DIR), *args], capture_output=True, text=True,
                                  timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return commit + ("-dirty" if dirty else "")


def kernels_used(model) -> list[str]:
    """The attention kernels the model's structure-aware layers actually ran, e.g. ``["fused"]``.

    ``auto`` is reported as what it resolved to (``fused`` or ``exact``); ``["stock"]`` for a model
    without a mechanism or with the ``global`` one (only the stock kernel runs); an empty list when the
    mechanism layers have not run yet.
    """
    from ..attention.integration import runtime_of

    rt = runtime_of(model)
    if rt is None or rt.mechanism.is_global:
        return ["stock"]
    return sorted(set(rt.kernels_resolved()))


def provenance(model=None) -> dict:
    """``{"structattn_version", "git_commit"[, "kernel"]}`` for a results line (kernel: joined names)."""
    out = {"structattn_version": package_version(), "git_commit": git_commit()}
    if model is not None:
        out["kernel"] = "+".join(kernels_used(model)) or None
    return out
