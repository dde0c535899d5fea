"""Checkpoint folders (single files are written atomically by `structattn.io`) and the RNG states in them.

A checkpoint folder is written under a temporary name and renamed into place, so
a run killed at any moment leaves either the previous checkpoint or the new one,
never half of one. A full disk while writing it (`AtomicDir.writing`) removes the temporary
folder and stops the run with one line naming the folder and the space it needs; the last committed
folder stays as it was.

RNG states are stored without pickle: Python's and NumPy's as JSON values (`python_rng_json`,
`numpy_rng_json`), torch's as tensors (`torch_rng_tensors`) or, in the engine's checkpoints, all
of them as one JSON object (`rng_json`). Model weights go to safetensors once each
(`model_tensors`, `load_model_tensors`). A saved model (weights, tokenizer, the files beside them) is written
the same way (`save_pretrained_atomically`).
"""
from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
from pathlib import Path
from typing import Any, Callable

from .. import stopping
from ..integrity import write_manifest
from ..io import DiskFull, disk_full_message, is_disk_full


class AtomicDir:
    """Context manager: write into ``.<name>.tmp-<tag>``, rename onto ``final`` on success.

    Replacing an existing ``final`` takes two renames: ``final`` -> ``.<name>.old-<tag>``, then
    tmp -> ``final``. The second rename is the commit. A process killed between the two leaves no
    ``final``; `recover_atomic_dirs` (called when a Trainer starts) then puts the old version
    back, i.e. rolls back to the last committed one (see there why not forward).

    tag: ``None`` = this process id; processes that write one folder together pass one shared tag
    (see `begin` / `commit` for splitting the steps between them). ``previous``: where the replaced
    version is kept (one, the one before it deleted) instead of being deleted: a fallback if ``final`` is damaged.

    Every committed folder holds a ``manifest.json`` (each file's size and SHA-256, `structattn.integrity`)
    written last, so that a damaged file is found when the folder is read. SIGINT and SIGTERM wait for the commit
    inside ``with`` (`structattn.stopping.deferred`); callers of `begin`/`commit` hold them themselves.
    """

    def __init__(self, final: Path, tag: str | None = None, previous: Path | None = None):
        self.final = Path(final)
        tag = str(os.getpid()) if tag is None else tag
        self.tmp = self.final.with_name(f".{self.final.name}.tmp-{tag}")
        self.old = self.final.with_name(f".{self.final.name}.old-{tag}")
        self.previous = previous

    def begin(self) -> Path:
        """Create an empty temporary folder (removing a stale one of the same tag) and return it."""
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        return self.tmp

    def commit(self, **manifest) -> None:
        """Record the temporary folder's manifest (with the ``manifest`` JSON values), move it onto ``final`` (the
        old version aside, then deleted or, with `previous`, kept there)."""
        write_manifest(self.tmp, **manifest)
        if self.final.exists():
            os.replace(self.final, self.old)
            _maybe_kill_between_renames(self.final)
        os.replace(self.tmp, self.final)
        if self.old.exists():
            if self.previous is None:
                shutil.rmtree(self.old)
            else:  # a kill in between leaves no previous copy, never a half one
                shutil.rmtree(self.previous, ignore_errors=True)
                os.replace(self.old, self.previous)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)  # best effort while another error propagates

    @contextlib.contextmanager
    def writing(self):
        """Around the writes into `tmp` (what ``with AtomicDir(...)`` does before committing): on an error
        the temporary folder is removed, and a full disk becomes `DiskFull`."""
        try:
            yield self.tmp
        except BaseException as exc:
            self._failed(exc)
            raise

    def _failed(self, exc: BaseException) -> None:
        """Remove the temporary folder; raise DiskFull (naming ``final`` and the space a complete folder needs: the
        last committed one's size, or, without one, more than what was written) when ``exc`` is a full disk."""
        written = _folder_bytes(self.tmp)
        self.abort()
        if isinstance(exc, Exception) and is_disk_full(exc):
            last = _folder_bytes(self.final) if self.final.exists() else 0
            kept = f" and the last saved {self.final} is unchanged" if self.final.exists() else ""
            raise DiskFull(disk_full_message(self.final, max(written, last), kept, at_least=last <= written)) from exc

    def __enter__(self) -> Path:
        stopping.hold()
        try:
            return self.begin()
        except BaseException:
            stopping.release(raise_pending=False)
            raise

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc is not None:
                self._failed(exc)
            else:
                self.commit()
        except BaseException:
            stopping.release(raise_pending=False)
            raise
        stopping.release(raise_pending=exc is None)  # a signal received meanwhile: Stopped, now it is committed
        return False


def save_pretrained_atomically(folder: Path, *parts: Any, then: Callable[[Path], None] | None = None) -> None:
    """Save a model folder whole or not at all: each of ``parts`` (a model, its tokenizer: anything with
    ``save_pretrained(folder)``) and then ``then(folder)`` (more files beside them) write into a temporary folder
    that is renamed onto ``folder`` (`AtomicDir`), so a kill or a full disk leaves the previous ``folder``."""
    with AtomicDir(folder) as tmp:
        for part in parts:
            part.save_pretrained(tmp)
        if then is not None:
            then(tmp)


def _folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it does not exist)."""
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


KILL_BETWEEN_RENAMES_ENV = "STRUCTATTN_KILL_BETWEEN_RENAMES"


def _maybe_kill_between_renames(final: Path) -> None:
    """Fault injection for the recovery test: ``STRUCTATTN_KILL_BETWEEN_RENAMES=best`` SIGKILLs this process
    after an existing ``best`` was moved aside and before the new one is renamed in."""
    if os.environ.get(KILL_BETWEEN_RENAMES_ENV) == final.name:
        os.kill(os.getpid(), signal.SIGKILL)


_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<tag>[^.]+)$")


def recover_atomic_dirs(parent: Path) -> list[Path]:
    """Repair what killed `AtomicDir` writers left in ``parent``; return the folders restored.

    A ``final`` that is missing while its ``.old-*`` exists was killed between the two renames: the
    old version is renamed back (the newest one if several). Roll back rather than forward because
    the old version is the last committed one: a complete ``.tmp-*`` cannot be told from one killed
    while being written, and for ``best/`` the old version is the one the last checkpoint's
    ``state.json`` names (checkpoints are written after ``best/``), so a resumed run stays
    consistent and recomputes the lost update. Every other leftover (``.tmp-*``, ``.old-*`` beside an
    existing ``final``) is deleted. Call it only while no writer is active in ``parent``.
    """
    parent = Path(parent)
    if not parent.is_dir():
        return []
    leftovers = [(p, _LEFTOVER.match(p.name)) for p in parent.iterdir() if p.is_dir()]
    leftovers = [(p, m) for p, m in leftovers if m is not None]
    restored = []
    olds = sorted((p for p, m in leftovers if m["kind"] == "old"), key=lambda p: p.stat().st_ctime, reverse=True)
    for p in olds:  # newest first: a rename sets the ctime
        final = parent / _LEFTOVER.match(p.name)["name"]
        if not final.exists():
            os.replace(p, final)
            restored.append(final)
    for p, _ in leftovers:
        if p.exists():
            shutil.rmtree(p)
    return restored


# ---------------------------------------------------------------------------------------------- RNG states
def python_rng_json() -> list:
    """Python's global RNG state as JSON lists: ``[version, [625 ints], gauss_next]``."""
    return _lists(random.getstate())


def set_python_rng(saved: list) -> None:
    """Restore what `python_rng_json` returned (JSON gives back lists; ``random`` wants tuples)."""
    random.setstate(_tuples(saved))


def numpy_rng_json() -> list:
    """NumPy's global RNG state as JSON values: ``[kind, [624 key words], pos, has_gauss, cached_gaussian]``."""
    import numpy as np

    kind, keys, *rest = np.random.get_state()
    return [kind, keys.tolist(), *rest]


def set_numpy_rng(saved: list) -> None:
    import numpy as np

    kind, keys, *rest = saved
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), *rest))


def torch_rng_tensors() -> dict[str, Any]:
    """torch's CPU RNG state (and every CUDA device's, when there is one) as uint8 tensors."""
    import torch

    rng: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return rng


def set_torch_rng(rng: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


def _lists(obj):
    return [_lists(x) for x in obj] if isinstance(obj, (tuple, list)) else obj


def _tuples(obj):
    return tuple(_tuples(x) for x in obj) if isinstance(obj, list) else obj


# ---------------------------------------------------------------------------------------------- model tensors
def model_tensors(model) -> dict:
    """The model's tensors once each (tied weights share one key), on the CPU, for safetensors."""
    seen, out = set(), {}
    for key, value in model.state_dict().items():
        if value.data_ptr() not in seen:
            seen.add(value.data_ptr())
            out[key] = value.detach().cpu().contiguous()
    return out


def load_model_tensors(model, weights: dict) -> None:
    """Load tensors saved by `model_tensors` or ``save_pretrained``; a key missing must be a tensor tied to a
    loaded one or a fixed table the model rebuilds itself (e.g. Marian's sinusoidal positions)."""
    from ..errors import UserError

    current = model.state_dict()
    fixed = {name for name, p in model.named_parameters() if not p.requires_grad}
    unexpected = sorted(set(weights) - set(current))
    if unexpected:
        raise UserError(f"saved weights hold keys this model does not have ({', '.join(unexpected[:3])}); the "
                        "checkpoint belongs to another configuration")
    model.load_state_dict({k: v.to(current[k].dtype) for k, v in weights.items()}, strict=False)
    loaded = {current[k].data_ptr() for k in weights}
    missing = [k for k in current if k not in weights and k not in fixed and current[k].data_ptr() not in loaded]
    if missing:
        raise UserError(f"saved weights lack {', '.join(missing[:3])}; the checkpoint is incomplete")


def rng_json() -> dict:
    """Every RNG state of this process as JSON values: Python's, NumPy's, torch's CPU (and CUDA) bytes."""
    rng = {"python": python_rng_json(), "numpy": numpy_rng_json()}
    for key, value in torch_rng_tensors().items():
        rng[key] = value.tolist() if key == "torch" else [t.tolist() for t in value]
    return rng


def set_rng_json(rng: dict) -> None:
    """Restore what `rng_json` returned."""
    import torch

    set_python_rng(rng["python"])
    set_numpy_rng(rng["numpy"])
    tensors = {"torch": torch.tensor(rng["torch"], dtype=torch.uint8)}
    if "cuda" in rng:
        tensors["cuda"] = [torch.tensor(t, dtype=torch.uint8) for t in rng["cuda"]]
    set_torch_rng(tensors)
