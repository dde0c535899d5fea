"""How the custom-op kernels (``fused``, ``triton``) are called, and their dropout seeds.

Each of those kernels is a ``torch.library`` custom op (with fake implementations, so ``torch.compile`` and
``torch.export`` trace it) and also a plain ``torch.autograd.Function`` over the same implementation. The op's eager
dispatch and its Python autograd wrapper cost several times the kernel's own host time on small inputs (a layer
of a short sequence), so eager calls on plain tensors take the Function (`eager_call`); traced calls, tensor
subclasses and dispatch modes take the op.

Dropout seeds: one per step (`draw_seed`, from torch's CPU generator, so ``torch.manual_seed`` makes it
reproducible), one per layer derived from it by arithmetic (`derive_seed`). Inside a compiled graph the seed is
an int64 scalar tensor, so drawing and deriving it needs no ``.item()`` (which would break the graph); the ops take
it as a tensor and read it in their implementation.

Outputs: every output of the ops is a tensor of its own (never a view, never sharing storage with another output or
an input), and the fake implementations give the same shape, strides, storage offset and dtype
(``torch.library.opcheck`` checks both; ``torch.compile``'s and CUDA graphs' accounting of storages relies on it).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch._C import _len_torch_dispatch_stack

Tensor = torch.Tensor

#: Seeds lie in [0, SEED_LIMIT): the kernels' hash reads 64 bits; draws below 2^62 leave room for derived seeds.
SEED_LIMIT = 2 ** 62
_SEED_STRIDE = 0x9E3779B97F4A7C15 % SEED_LIMIT   # odd: distinct layer numbers give distinct seeds


def eager_call(*tensors: Optional[Tensor]) -> bool:
    """Whether a kernel may call its implementation directly instead of its custom op: not while
    ``torch.compile`` / ``torch.export`` trace, not under a ``TorchDispatchMode`` and not on tensor subclasses
    (fake or functional tensors), which all need to see the op."""
    if torch.compiler.is_compiling() or _len_torch_dispatch_stack() > 0:
        return False
    for t in tensors:
        if t is not None and type(t) is not Tensor:
            return False
    return True


def heads_inner(b: int, h: int, rows: int, d: int, like: Tensor) -> Tensor:
    """A fresh [b, h, rows, d] tensor of ``like``'s dtype and device laid out as [b, rows, h, d] in memory (what the
    kernels write; ``t.transpose(1, 2)`` is contiguous, as HF's attention output wants). Not a permuted view: an op's
    output must own its storage."""
    return torch.empty_strided((b, h, rows, d), (rows * h * d, d, h * d, 1), dtype=like.dtype, device=like.device)


def needs_grad(*tensors: Tensor) -> bool:
    """Whether autograd records a call on these inputs."""
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if t.requires_grad:
            return True
    return False


def draw_seed(as_tensor: bool = False):
    """A dropout seed in [0, SEED_LIMIT) from torch's CPU generator: an int, or with ``as_tensor`` an int64 scalar
    tensor (what a compiled graph uses)."""
    seed = torch.randint(0, SEED_LIMIT, (), dtype=torch.int64)
    return seed if as_tensor else int(seed)


def derive_seed(step_seed, index: int):
    """The seed of call ``index`` (a layer number) of a step whose seed is ``step_seed`` (an int or an int64
    scalar tensor; the result is of the same kind, in [0, SEED_LIMIT))."""
    return step_seed ^ ((index + 1) * _SEED_STRIDE % SEED_LIMIT)


def seed_tensor(seed) -> Tensor:
    """An int or an int64 scalar tensor -> an int64 scalar tensor (the custom ops' seed argument)."""
    return seed if isinstance(seed, Tensor) else torch.full((), int(seed), dtype=torch.int64)
