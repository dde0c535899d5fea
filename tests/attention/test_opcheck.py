"""``torch.library.opcheck`` for every custom op the package registers, and the ops' outputs owning their storage.

The ops: the ``fused`` kernel's native CPU forward and backward, and the ``triton`` kernel's forward and backward
(on CPU tensors under Triton's interpreter, which tests/conftest.py selects; on CUDA tensors with
``TRITON_INTERPRET=0`` on a GPU machine). Each is checked with the inputs the models give it: q, k, v [b, h, n, d] as
transposed views of [b, n, h, d] (HF's layout), a local mask [b, 1, n, m] (and one per head), the padding mask
``base`` [b, 1, n, m] present or absent, a gate per token [b, 1, n] or per head [b, h, n], attention dropout 0 and
0.1, with and without gradients, in the dtypes the kernel runs (fused: float32 and float64, the float32 path taking
bf16/fp16 after the caller's upcast; triton: float32, bfloat16, float16 and, interpreted, float64). opcheck runs
the op against its schema, its fake implementation (shape, strides, storage offset and dtype of every output),
its autograd registration and AOT dispatch with dynamic shapes.

A further test lists the ``structattn::`` ops registered in torch's dispatcher and fails when one is not covered
here. Shapes are tiny (the interpreter runs every Triton program in Python): the file runs in seconds.
"""
from __future__ import annotations

import itertools

import pytest
import torch
from attn_helpers import kernel_inputs, require_fused

from structattn.attention import kernels as K
from structattn.attention import triton_kernel as TK
from structattn.attention.eager import seed_tensor

B, H, N, M, D = 2, 2, 7, 9, 8
SCALE = D ** -0.5
TILE = (16, 16)   # the triton kernel's block_m, block_n


def _triton_device():
    """Where the triton kernel runs here, or None (with the reason) when it cannot."""
    if not TK.installed():
        return None, "the optional triton package is not installed (pip install -e '.[gpu]')"
    if TK.interpreted():
        return "cpu", None
    if torch.cuda.is_available():
        return "cuda", None
    return None, "triton was imported without TRITON_INTERPRET=1 and there is no GPU"


class Kernel:
    """One kernel's forward and backward ops and how the models call them."""

    def __init__(self, name: str, forward: str, backward: str, dtypes, extra: tuple = ()):
        self.name, self.forward, self.backward, self.dtypes, self.extra = name, forward, backward, dtypes, extra

    def device(self) -> str:
        """Where its op runs in this test session (skips the test, with the reason, where it cannot run)."""
        if self.name == "fused":
            require_fused()
            return "cpu"
        device, why = _triton_device()
        if device is None:
            pytest.skip(why)
        return device


KERNELS = {
    "fused": Kernel("fused", K._FORWARD_OP, K._BACKWARD_OP, (torch.float32, torch.float64)),
    "triton": Kernel("triton", TK._FORWARD_OP, TK._BACKWARD_OP,
                     (torch.float32, torch.bfloat16, torch.float16, torch.float64), extra=TILE),
}


def _op(qualname: str):
    namespace, name = qualname.split("::")
    return getattr(getattr(torch.ops, namespace), name).default


def _forward_args(kernel: Kernel, device: str, dtype, *, has_base: bool, dropout_p: float, grad: bool,
                  gate_heads: int = 1, mask_heads: int = 1) -> tuple:
    """The forward op's arguments as a model's layer passes them (module docstring)."""
    if dtype == torch.float64 and device == "cuda":
        pytest.skip("Triton does not compile float64 products for a GPU (float64 runs interpreted only)")
    q, k, v, local, base, gate = kernel_inputs(b=B, h=H, n=N, m=M, d=D, gate_heads=gate_heads, mask_heads=mask_heads,
                                               layout="bnhd", seed=3)
    gate_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    q, k, v = (t.to(device, dtype).detach().requires_grad_(grad) for t in (q, k, v))
    gate = gate.to(device, gate_dtype).requires_grad_(grad)
    base = base.to(device) if has_base else None
    return (q, k, v, base, local.to(device), gate, SCALE, dropout_p, seed_tensor(11), *kernel.extra)


def _backward_args(kernel: Kernel, fwd_args: tuple) -> tuple:
    """The backward op's arguments: an upstream gradient [b, h, n, d] (unit stride in d) and the forward's lse."""
    fwd_args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in fwd_args)
    q, k, v, base, local, gate, scale, dropout_p, seed, *blocks = fwd_args
    out, lse = _op(kernel.forward)(*fwd_args)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(5)).to(out)
    return (dout, q, k, v, base, local, gate, lse, scale, dropout_p, seed, *blocks)


def _cases(dtypes) -> list[tuple]:
    """(dtype, base, dropout, grad, gate heads, mask heads): the first dtype (float32) with and without base and
    dropout; every other dtype with base and dropout and without either; per-head gates and masks; inference
    (no gradient) in float32 and the second dtype."""
    first, *others = dtypes
    cases = [(first, has_base, p, True, 1, 1) for has_base, p in itertools.product((True, False), (0.0, 0.1))]
    cases += [(dt, has_base, p, True, 1, 1) for dt in others for has_base, p in ((True, 0.1), (False, 0.0))]
    cases += [(first, True, 0.1, True, H, 1), (first, True, 0.0, True, H, H)]
    return cases + [(dt, True, 0.0, False, 1, 1) for dt in dtypes[:2]]


def _case_id(case) -> str:
    dtype, has_base, p, grad, gh, mh = case
    return (f"{str(dtype).split('.')[-1]}-{'base' if has_base else 'nobase'}-p{p}-{'grad' if grad else 'nograd'}"
            f"-gate{gh}-mask{mh}")


CASES = [(kernel, case) for kernel, kern in KERNELS.items() for case in _cases(kern.dtypes)]


@pytest.mark.parametrize("kernel,case", CASES, ids=[f"{k}-{_case_id(c)}" for k, c in CASES])
def test_opcheck_forward_and_backward(kernel, case):
    kern = KERNELS[kernel]
    dtype, has_base, dropout_p, grad, gate_heads, mask_heads = case
    args = _forward_args(kern, kern.device(), dtype, has_base=has_base, dropout_p=dropout_p, grad=grad,
                         gate_heads=gate_heads, mask_heads=mask_heads)
    torch.library.opcheck(_op(kern.forward), args)
    if grad:
        torch.library.opcheck(_op(kern.backward), _backward_args(kern, args))


def _assert_owned(outputs, inputs, what: str) -> None:
    """No output is a view, and no output shares storage with another output or with an input."""
    seen = {}
    for t in inputs:
        if isinstance(t, torch.Tensor):
            seen[t.untyped_storage().data_ptr()] = "an input"
    for j, out in enumerate(outputs):
        assert not out._is_view(), f"{what} output {j} is a view"
        ptr = out.untyped_storage().data_ptr()
        assert ptr not in seen, f"{what} output {j} shares storage with {seen[ptr]}"
        seen[ptr] = f"output {j}"


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("has_base", [True, False])
def test_no_output_aliases_another_output_or_an_input(kernel, has_base):
    kern = KERNELS[kernel]
    args = _forward_args(kern, kern.device(), torch.float32, has_base=has_base, dropout_p=0.1, grad=False)
    _assert_owned(_op(kern.forward)(*args), args, f"{kernel} forward")
    bargs = _backward_args(kern, args)
    _assert_owned(_op(kern.backward)(*bargs), bargs, f"{kernel} backward")


def test_every_registered_op_is_checked():
    registered = {name for name in torch._C._dispatch_get_all_op_names() if name.startswith("structattn::")}
    checked = {name for kern in KERNELS.values() for name in (kern.forward, kern.backward)}
    assert registered == checked, f"ops without opcheck: {sorted(registered - checked)}"
