"""The ``triton`` kernel's launcher: Triton forward and backward kernels (`triton_jit`) registered as a
versioned ``torch.library`` custom op with fake implementations (``torch.compile`` traces it) and autograd.

Notation: b batch, h heads, n queries, m keys, d head size; G gate heads (1 or h). The semantics are those of
every kernel in [`structattn.attention.kernels`][structattn.attention.kernels] (its module docstring); the user-facing
function is
[`structattn.attention.kernels.triton_mixed_attention`][structattn.attention.kernels.triton_mixed_attention], which
validates inputs and calls `mixed_attention` here.

``triton`` is an optional dependency (``pip install "structattn[gpu]"``); the kernels (`triton_jit`) are
defined when this kernel first runs. On CUDA they are compiled for the GPU. On CPU tensors they run only under
Triton's interpreter, which Triton selects while it defines kernels, those of ``triton.language`` included:
``TRITON_INTERPRET=1`` must be in the environment before triton is first imported, which torch itself does
early (``torch._dynamo``, ``torch.library``), so in practice before Python starts (the tests' conftest sets it).
The interpreter is slow: it is meant for checking the kernel without a GPU.
"""
from __future__ import annotations

from typing import Optional

import torch

from .eager import eager_call, heads_inner, needs_grad, seed_tensor

Tensor = torch.Tensor

# The op names carry the layout version of what the forward saves for the backward (as the CPU op's do:
# torch.compile's on-disk cache keys on the name). The layout of v3: out [b, h, n, d] and lse [b, h, n], every output
# a tensor of its own (none a view of another or of a scratch buffer); the dropout seed an int64 scalar tensor (CPU),
# so a compiled graph draws it without a graph break.
_OP_VERSION = "v3"
_FORWARD_OP = f"structattn::triton_mixed_attention_forward_{_OP_VERSION}"
_BACKWARD_OP = f"structattn::triton_mixed_attention_backward_{_OP_VERSION}"

# Local maximum further than this below the global one: the tile takes its own local exponential (the CPU
# kernel's kGap and kernels.UNDERFLOW_GAP; a test checks they agree).
UNDERFLOW_GAP = 60.0
DEFAULT_BLOCK_M = 64   # query rows per program (forward, dq)
DEFAULT_BLOCK_N = 64   # key rows per tile (forward, dq) and per program (dk, dv); 32 for d > 64
NUM_WARPS = 4
NUM_STAGES = 2
_MASK32 = 0xFFFFFFFF

_jit_module = None   # triton_jit, once imported


def installed() -> bool:
    """Whether the ``triton`` package is importable (torch imports it anyway when it is)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def interpreted() -> bool:
    """Whether Triton runs kernels under its interpreter in this process (``triton.language`` was defined with
    ``TRITON_INTERPRET=1``); imports triton."""
    import triton.language as tl

    return type(tl.zeros).__name__ == "InterpretedFunction"


def unavailable_reason(device: torch.device | str) -> Optional[str]:
    """Why the kernel cannot run on ``device`` (None if it can): triton missing, a CPU device without the
    interpreter, a CUDA device without CUDA or older than compute capability 8.0, or another device type."""
    device = torch.device(device)
    if not installed():
        return "the triton package is not installed (pip install 'structattn[gpu]')"
    if device.type == "cpu":
        if not interpreted():
            return ("on CPU tensors Triton kernels run only under Triton's interpreter: set TRITON_INTERPRET=1 in the "
                    "environment before Python starts (it is slow, meant for tests; on CPU use kernel='fused' or "
                    "'auto')")
        return None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return "CUDA is not available"
        major, minor = torch.cuda.get_device_capability(device)
        if major < 8:
            return f"the GPU has compute capability {major}.{minor}; the kernel needs 8.0 or newer (Ampere)"
        return None
    return f"device type {device.type!r} (the kernel runs on CUDA, and on CPU under Triton's interpreter)"


def _jit():
    """The module of Triton kernels, imported (and so defined, interpreted or compiled) on the first call."""
    global _jit_module
    if _jit_module is None:
        from . import triton_jit

        if triton_jit.INTERPRETED != interpreted():
            from ..errors import UserError

            raise UserError("TRITON_INTERPRET changed after triton was imported: set it (or not) in the environment "
                            "before Python starts")
        _jit_module = triton_jit
    return _jit_module


# ---------------------------------------------------------------------------------------------- launch


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _block_d(d: int) -> int:
    return max(16, 1 << (d - 1).bit_length())


def _mask_args(mask: Optional[Tensor], fallback: Tensor, b: int, h: int, n: int, m: int) -> list:
    """A bool mask [b|1, 1|h, n|1, m] as a uint8 tensor broadcast to [b, h, n, m] (stride 0 on size-1 dims) and
    its four strides; ``fallback`` (any uint8 tensor) stands in for an absent mask, which the kernel never reads."""
    if mask is None:
        return [fallback, 0, 0, 0, 0]
    view = mask.view(torch.uint8).expand(b, h, n, m)
    return [view, *view.stride()]


def _dropout_args(dropout_p: float, seed: int) -> list:
    """(seed key, threshold, keep scale): the CPU kernel's row_key(row, seed) is fmix32(row ^ seed key) for every
    row index below 2^32, and an element is kept where its hash >= threshold."""
    if dropout_p <= 0.0:
        return [0, 0, 1.0]
    s = seed & ((1 << 64) - 1)
    seed_key = _fmix32((0x9E3779B9 * (s & _MASK32)) & _MASK32) ^ ((s >> 32) & _MASK32)
    thresh = int(min(4294967295.0, dropout_p * 4294967296.0))
    return [seed_key, thresh, 1.0 / (1.0 - dropout_p)]


def _fmix32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & _MASK32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & _MASK32
    return x ^ (x >> 16)


def keep_mask(b: int, h: int, n: int, m: int, dropout_p: float, seed: int) -> Tensor:
    """The dropout keep mask [b, h, n, m] bool the kernel draws for (dropout_p, seed), computed with torch on the
    CPU (for tests and the self-check; the CPU fused kernel's ``dropout_keep_mask`` gives the same mask)."""
    seed_key, thresh, _ = _dropout_args(dropout_p, seed)

    def fmix32(x: Tensor) -> Tensor:   # int64 tensors holding uint32 values; products wrap, the mask keeps 32 bits
        x = x ^ (x >> 16)
        x = (x * 0x85EBCA6B) & _MASK32
        x = x ^ (x >> 13)
        x = (x * 0xC2B2AE35) & _MASK32
        return x ^ (x >> 16)

    key = fmix32(torch.arange(b * h * n, dtype=torch.int64) ^ seed_key)
    hashed = fmix32((key[:, None] + torch.arange(m, dtype=torch.int64)[None, :] * 0x9E3779B1) & _MASK32)
    return (hashed >= thresh).view(b, h, n, m)


def _common(q: Tensor, k: Tensor, base: Optional[Tensor], local: Tensor, scale: float, dropout_p: float, seed: int,
            block_m: int, block_n: int):
    """(tensor arguments, scalar arguments, constexpr keywords) shared by the three kernels."""
    jit = _jit()
    b, h, n, d = q.shape
    m = k.shape[2]
    local_args = _mask_args(local, None, b, h, n, m)
    base_args = _mask_args(base, local_args[0], b, h, n, m)
    interp = jit.INTERPRETED
    if q.dtype in (torch.float16, torch.bfloat16) or (q.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32
                                                      and not interp):
        precision = "tf32"   # Triton's default (half inputs use tensor cores whatever it says)
    else:
        precision = "ieee"
    acc = jit.tl.float64 if q.dtype == torch.float64 else jit.tl.float32
    constexprs = dict(HAS_BASE=base is not None, DROPOUT=dropout_p > 0.0, UPCAST=interp and q.dtype == torch.bfloat16,
                      PRECISION=precision, ACC=acc, GAP=UNDERFLOW_GAP, BLOCK_M=block_m, BLOCK_N=block_n,
                      BLOCK_D=_block_d(d), num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    scalars = [h, n, m, d, float(scale), *_dropout_args(dropout_p, seed)]
    return base_args, local_args, scalars, constexprs


def _forward_impl(q, k, v, base, local, gate, scale, dropout_p, seed, block_m, block_n):
    b, h, n, d = q.shape
    out = heads_inner(b, h, n, d, q)
    lse = torch.empty((b, h, n), dtype=_acc_dtype(q.dtype), device=q.device)
    base_args, local_args, scalars, constexprs = _common(q, k, base, local, scale, dropout_p, seed, block_m, block_n)
    g = gate.expand(b, h, n)
    _jit().mixed_forward[(_cdiv(n, block_m), b * h)](
        q, k, v, base_args[0], local_args[0], g, out, lse, *q.stride(), *k.stride(), *v.stride(), *base_args[1:],
        *local_args[1:], *g.stride(), *out.stride(), *scalars, **constexprs)
    return out, lse


def _backward_impl(dout, q, k, v, base, local, gate, lse, scale, dropout_p, seed, block_m, block_n):
    b, h, n, d = q.shape
    m = k.shape[2]
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    # per-row scratch in one buffer; the gate gradient, an output, in a tensor of its own
    lse_l, dlt_g, dlt_l, geff = torch.empty((4, b, h, n), dtype=lse.dtype, device=q.device).unbind(0)
    dg = torch.empty((b, h, n), dtype=lse.dtype, device=q.device)
    base_args, local_args, scalars, constexprs = _common(q, k, base, local, scale, dropout_p, seed, block_m, block_n)
    g = gate.expand(b, h, n)
    masks = [base_args[0], local_args[0]]
    strides = [*q.stride(), *k.stride(), *v.stride(), *base_args[1:], *local_args[1:]]
    jit = _jit()
    jit.backward_rows[(_cdiv(n, block_m), b * h)](
        q, k, v, *masks, g, dout, lse, lse_l, dlt_g, dlt_l, geff, dg, dq, *strides, *g.stride(), *dout.stride(),
        *dq.stride(), *scalars, **constexprs)
    jit.backward_keys[(_cdiv(m, block_n), b * h)](
        q, k, v, *masks, dout, lse, lse_l, dlt_g, dlt_l, geff, dk, dv, *strides, *dout.stride(), *dk.stride(),
        *dv.stride(), *scalars, **constexprs)
    return dq, dk, dv, dg


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------- custom op


@torch.library.custom_op(_FORWARD_OP, mutates_args=(), device_types=("cpu", "cuda"))
def _forward(q: Tensor, k: Tensor, v: Tensor, base: Optional[Tensor], local: Tensor, gate: Tensor, scale: float,
             dropout_p: float, seed: Tensor, block_m: int, block_n: int) -> tuple[Tensor, Tensor]:
    return _forward_impl(q, k, v, base, local, gate, scale, dropout_p, int(seed), block_m, block_n)


@_forward.register_fake
def _forward_fake(q, k, v, base, local, gate, scale, dropout_p, seed, block_m, block_n):
    b, h, n, d = q.shape
    return heads_inner(b, h, n, d, q), q.new_empty((b, h, n), dtype=_acc_dtype(q.dtype))


@torch.library.custom_op(_BACKWARD_OP, mutates_args=(), device_types=("cpu", "cuda"))
def _backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, base: Optional[Tensor], local: Tensor, gate: Tensor,
              lse: Tensor, scale: float, dropout_p: float, seed: Tensor, block_m: int,
              block_n: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _backward_impl(dout, q, k, v, base, local, gate, lse, scale, dropout_p, int(seed), block_m, block_n)


@_backward.register_fake
def _backward_fake(dout, q, k, v, base, local, gate, lse, scale, dropout_p, seed, block_m, block_n):
    b, h, n, d = q.shape
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), lse.new_empty((b, h, n))


def _setup_context(ctx, inputs, output):
    q, k, v, base, local, gate, scale, dropout_p, seed, block_m, block_n = inputs
    ctx.save_for_backward(q, k, v, base, local, gate, output[1], seed)
    ctx.args = (scale, dropout_p)
    ctx.blocks = (block_m, block_n)
    ctx.set_materialize_grads(False)   # lse is never differentiated


def _gate_grad(dg: Tensor, gate: Tensor) -> Tensor:
    """The kernel's gate gradient [b, h, n] -> the gate's shape [b, G, n] and dtype."""
    if gate.shape[1] == 1:
        dg = dg.sum(dim=1, keepdim=True)
    return dg.to(gate.dtype)


def _autograd(ctx, dout, dlse):
    q, k, v, base, local, gate, lse, seed = ctx.saved_tensors
    dq, dk, dv, dg = _backward(dout, q, k, v, base, local, gate, lse, *ctx.args, seed, *ctx.blocks)
    return dq, dk, dv, None, None, _gate_grad(dg, gate), None, None, None, None, None


torch.library.register_autograd(_FORWARD_OP, _autograd, setup_context=_setup_context)


class _TritonFunction(torch.autograd.Function):
    """The eager autograd of the kernel: the launches called directly, without the custom op's dispatch and its
    Python autograd wrapper (several times the launch's own host time); only ``out`` is an output."""

    @staticmethod
    def forward(ctx, q, k, v, base, local, gate, scale, dropout_p, seed, block_m, block_n):
        out, lse = _forward_impl(q, k, v, base, local, gate, scale, dropout_p, seed, block_m, block_n)
        ctx.save_for_backward(q, k, v, base, local, gate, lse)
        ctx.args = (scale, dropout_p, seed, block_m, block_n)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, base, local, gate, lse = ctx.saved_tensors
        dq, dk, dv, dg = _backward_impl(dout, q, k, v, base, local, gate, lse, *ctx.args)
        return dq, dk, dv, None, None, _gate_grad(dg, gate), None, None, None, None, None


def mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor, base: Optional[Tensor], *,
                    scale: float, dropout_p: float, seed, block_m: int, block_n: int) -> Tensor:
    """The op: q [b, h, n, d], k, v [b, h, m, d] of one dtype (float32, bfloat16, float16 or float64; any strides),
    local / base [b|1, 1|h, n|1, m] bool (base None = every key), gate [b, G, n] float32 (float64 for float64
    inputs) -> out [b, h, n, d] in q's dtype (laid out as [b, n, h, d]: `eager.heads_inner`). ``seed``: an int, or an int64
    scalar CPU tensor (what a compiled graph passes). Inputs are not validated here (see
    [`structattn.attention.kernels.triton_mixed_attention`][structattn.attention.kernels.triton_mixed_attention]); block
    sizes are powers of two >= 16.

    Eager calls on plain tensors launch the kernels through `_TritonFunction`; traced calls (and tensor
    subclasses, dispatch modes) go through the custom op."""
    if eager_call(q, k, v, base, local, gate) and not isinstance(seed, Tensor):
        if needs_grad(q, k, v, gate):
            return _TritonFunction.apply(q, k, v, base, local, gate, scale, dropout_p, seed, block_m, block_n)
        return _forward_impl(q, k, v, base, local, gate, scale, dropout_p, seed, block_m, block_n)[0]
    return _forward(q, k, v, base, local, gate, scale, dropout_p, seed_tensor(seed), block_m, block_n)[0]


def default_blocks(d: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) for head size d on a GPU: two [BLOCK_M, d] accumulators live in registers."""
    return DEFAULT_BLOCK_M, DEFAULT_BLOCK_N if d <= 64 else 32
