"""Which structattn wrote a saved folder: a run folder or model folder of an earlier version is refused in one line
that names the version and what to do, before anything in it is read.

Every loader calls [`check_saved_version`][structattn.models.saved_version.check_saved_version] first: a resume
(`structattn.train.engine.Engine.begin`), ``structattn evaluate`` / ``predict`` (`structattn.train.config.saved_run_config`),
[`structattn.from_pretrained`][structattn.models.encoder.from_pretrained] on a local folder and
``Parser`` / ``Translator`` / ``Reader`` folders (`structattn.models.trained.resolve`). Folders an earlier version
wrote, told apart by what that version wrote and this one never does:

* a run folder none of whose checkpoints (``checkpoint/``, ``previous-checkpoint/``) has a ``manifest.json`` (this
  version's engine writes one into every checkpoint, last; `structattn.integrity`): structattn 0.2.0 or earlier. A
  checkpoint that lost its manifest beside one that has it is this version's, and the engine reads it as it reads
  any checkpoint without one (each file's form checked);
* a run folder with a ``checkpoint-<step>/`` holding ``trainer_state.json`` (Accelerate's ``save_state``): the
  sentence trainer of a structattn before 0.1.0;
* a model folder whose ``config.json`` records a mechanism (``structattn``) or an SG-Net layer (``structattn_sgnet``
  with an aggregation other than ``none``) under the encoder's own ``model_type`` (this version writes
  ``"model_type": "structattn"``, `structattn.models.saved_type`): structattn 0.2.0 or earlier.

structattn 0.2.0 reads all of them (it rewrote older checkpoints in place on resume), so the line says: train again
with this version, or use structattn 0.2.0. A stock model folder, a parser folder and anything that is not a
folder pass unchecked here.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError
from ..integrity import MANIFEST
from .saved_type import MODEL_TYPE

#: the release that reads every layout an earlier version wrote
READS_EARLIER = "0.2.0"
_INSTALL = f'pip install "structattn=={READS_EARLIER}"'


def _run_folder_writer(folder: Path) -> str | None:
    """The version that wrote the run folder ``folder``'s checkpoints when it is an earlier one, else None."""
    checkpoints = [c for c in (folder / "checkpoint", folder / "previous-checkpoint")
                   if c.is_dir() and any(c.iterdir())]
    if checkpoints and not any((c / MANIFEST).exists() for c in checkpoints):
        return f"structattn {READS_EARLIER} or earlier"
    if any((p / "trainer_state.json").is_file() for p in folder.glob("checkpoint-*")):
        return "a structattn before 0.1.0"
    return None


def _model_folder_writer(folder: Path) -> str | None:
    """The version that wrote the model folder ``folder``'s ``config.json`` when it is an earlier one, else None (a
    config that does not parse is left to the damage checks)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or config.get("model_type") == MODEL_TYPE:
        return None
    sgnet = config.get("structattn_sgnet")
    with_sg_layer = isinstance(sgnet, dict) and sgnet.get("aggregation") != "none"
    if isinstance(config.get("structattn"), dict) or with_sg_layer:
        return f"structattn {READS_EARLIER} or earlier"
    return None


def check_saved_version(folder: str | Path) -> None:
    """Refuse ``folder`` in one line ([`UserError`][structattn.errors.UserError]) when an earlier structattn wrote it
    (module docstring); return when this version wrote it, it is no structattn folder, or no folder at all."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    writer = _run_folder_writer(folder)
    if writer is not None:
        raise UserError(f"{folder} holds a run whose checkpoint was written by {writer}, which this structattn does "
                        "not read: train the run again (give another --output-dir, or delete that folder), or "
                        f"resume it with structattn {READS_EARLIER} ({_INSTALL})")
    writer = _model_folder_writer(folder)
    if writer is not None:
        raise UserError(f"{folder} holds a model saved by {writer}, which this structattn does not read: train it "
                        f"again with this version, or load it with structattn {READS_EARLIER} ({_INSTALL})")
