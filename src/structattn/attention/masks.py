"""The masks of a mechanism layer call, made once per step: the padding mask as bool [b, 1|h, n, m] and the local
pattern bool [b|1, 1, n, m] from the call's ``structure_mask`` (or the token window, when the mechanism needs no
structure), with the message saying what to pass when a mechanism's mask is missing."""
from __future__ import annotations

from typing import Any, Optional

import torch

from ..errors import UserError
from .kernels import finite_min
from .mechanisms import MechanismConfig
from .runtime import Runtime


def bool_mask(attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """HF's prepared mask (bool for sdpa, additive float for eager) -> bool [b, 1|h, n, m] or None."""
    if attention_mask is None:
        return None
    if attention_mask.dtype == torch.bool:
        return attention_mask
    return attention_mask > finite_min(attention_mask.dtype) / 2


def step_bool_mask(rt: Runtime, attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """`bool_mask`, converted once per step (eager masks are float; sdpa's are bool already)."""
    if attention_mask is None or attention_mask.dtype == torch.bool:
        return attention_mask
    return rt.step.cached(("base",), (attention_mask,), lambda: bool_mask(attention_mask))


def _missing_mask_error(mech: MechanismConfig) -> UserError:
    """What to do when a mechanism that needs ``structure_mask`` was called without one."""
    build = ("build it with structattn.structure: encode_words (token_word per token), word structures for "
             f"relation {mech.relation!r}, then StructureCollator (the `structattn train` pipeline does this)")
    if mech.relation == "window":
        return UserError(
            f"mechanism {mech.name!r} counts its window in words (window_unit='word'), and a call without "
            "structure_mask has no word boundaries. Pass structure_mask=[batch, T, T] bool (True = may attend); "
            f"{build}. For a window over sub-word tokens (the SLA paper's WLA, Xu et al.'s hybrid) install the "
            "mechanism with window_unit='token'; then no structure_mask is needed")
    opts = ", ".join(f"{k}={v}" for k, v in mech.relation_options().items())
    return UserError(f"mechanism {mech.name!r} needs structure_mask=[batch, T, T] bool (True = may attend) in the "
                     f"model call{' (' + opts + ')' if opts else ''}; {build}")


def _local_mask(rt: Runtime, structure: Any, b: int, n: int, m: int, device: torch.device) -> torch.Tensor:
    """The local pattern for this call: bool [b|1, 1, n, m].

    structure: the call's ``structure_mask`` ([b, n, m] or [b, choices, n, m], bool or 0/1) or None.
    """
    mech = rt.mechanism
    if structure is None:
        if mech.relation == "window" and mech.window_unit == "token":
            return rt.window(n, m, mech.k, device)
        if mech.relation == "all":
            return torch.ones((1, 1, n, m), dtype=torch.bool, device=device)
        raise _missing_mask_error(mech)
    if not isinstance(structure, torch.Tensor):
        structure = torch.as_tensor(structure)
    if structure.dtype != torch.bool:
        structure = structure != 0
    if structure.dim() == 4 and structure.shape[0] * structure.shape[1] == b:  # multiple choice [b, c, T, T]
        structure = structure.reshape(b, structure.shape[2], structure.shape[3])
    if structure.dim() != 3 or tuple(structure.shape) != (b, n, m):
        raise UserError(f"structure_mask has shape {tuple(structure.shape)}; expected [batch, T, T] = "
                        f"[{b}, {n}, {m}] for this input (or [batch, choices, T, T] for multiple choice)")
    return structure.to(device=device, non_blocking=True).unsqueeze(1)


def step_local_mask(rt: Runtime, structure: Any, b: int, n: int, m: int, device: torch.device) -> torch.Tensor:
    """`_local_mask`, checked, converted and moved once per step (every layer of a call gets the same
    ``structure_mask``)."""
    return rt.step.cached(("local", b, n, m, device), (structure,),
                          lambda: _local_mask(rt, structure, b, n, m, device))
