"""The state structattn keeps on a model: `Runtime` (one per model, shared by its attention modules: the
mechanism, open recordings, resolved kernels, the token-window cache), `Step` (what the mechanism layers
of one forward call share) and [`GateRecord`][structattn.attention.runtime.GateRecord] (what a recording collects);
[`runtime_of`][structattn.attention.runtime.runtime_of] finds it."""
from __future__ import annotations

import dataclasses
import itertools
import weakref
from typing import Any, Callable, Optional

import torch
from torch import nn

from ..structure.relations import band
from .kernels import resolve_kernel_name, tensor_version
from .mechanisms import MechanismConfig
from .stock import stock_function

#: How many token-window masks (one per sequence shape) a model keeps.
WINDOW_CACHE_SIZE = 8

# Kernels resolved while torch.compile traced a model: Runtime.token -> {device type: kernel name}
_TRACED_KERNELS: dict[str, dict[str, str]] = {}
_TOKENS = itertools.count()


@torch.compiler.assume_constant_result   # run at trace time as plain Python; its result a constant of the graph
def _resolve_traced(token: str, name: str, device_type: str) -> str:
    """`resolve_kernel_name` for a traced call, recorded under the runtime's ``token``."""
    resolved = _TRACED_KERNELS.setdefault(token, {})[device_type] = resolve_kernel_name(name, device_type)
    return resolved


@dataclasses.dataclass
class GateRecord:
    """What [`record`][structattn.attention.recording.record] (or ``output_gates=True``) collected, one entry per
    mechanism layer call.

    gates: [b, n] (per-token gate) or [b, h, n] (per-head gate) tensors, detached.
    attentions: mixed probabilities [b, h, n, m] (only when requested), detached.
    layers: encoder layer index of each entry (ALBERT's shared layer: its call number).
    """

    want_attentions: bool = False
    gates: list = dataclasses.field(default_factory=list)
    attentions: list = dataclasses.field(default_factory=list)
    layers: list = dataclasses.field(default_factory=list)


class Step:
    """What the mechanism layers of one forward call of the model share, prepared by the first layer that needs
    it: the structure and padding masks in the kernels' format, the inputs already checked, the dropout seed.

    Entries are matched by the identity and version of the tensors they were made from (so a call that reaches
    a layer without the model's pre-hook, or edits a mask in place, never reuses a stale one) and dropped when
    the next call of the model starts. Inside ``torch.compile`` nothing is cached (the graph computes each once).
    """

    MAX_ENTRIES = 16

    def __init__(self):
        self.open = False          # between the model's pre-hook and its forward hook
        self.seed = None           # dropout seed of the step: an int, or an int64 tensor in a compiled graph
        self.seed_per_layer = False  # gradient checkpointing: each layer draws its own seed (dispatch._dropout_seed)
        self.implementation_checked = False  # the model still runs "structattn" (hooks.gate_pre_hook)
        self.plan = None           # what the step's mechanism layers share (dispatch._StepPlan), made by the first
        self.entries: dict[tuple, tuple] = {}

    def start(self, seed_per_layer: bool) -> None:
        self.open, self.seed, self.seed_per_layer = True, None, seed_per_layer
        self.implementation_checked = False
        self.plan = None
        self.entries.clear()

    def cached(self, key: tuple, sources: tuple, build: Callable[[], Any]) -> Any:
        """``build()``, made once per step for these source tensors (any of them may be None); one entry per
        ``key``: other sources replace it."""
        if torch.compiler.is_compiling():
            return build()
        hit = self.entries.get(key)
        if hit is not None and _same_tensors(hit[0], hit[1], sources):
            return hit[2]
        value = build()
        if len(self.entries) >= self.MAX_ENTRIES:
            self.entries.clear()
        # holding the sources keeps their ids from being reused while the entry lives
        self.entries[key] = (sources, tuple(tensor_version(t) for t in sources), value)
        return value

    def first(self, key: tuple, sources: tuple) -> bool:
        """True for the first call of this step with ``key`` and these source tensors (inside a compiled graph:
        always)."""
        built = []
        self.cached(key, sources, lambda: built.append(True))
        return bool(built)


def _same_tensors(held: tuple, versions: tuple, sources: tuple) -> bool:
    """Whether ``sources`` are the ``held`` objects, unchanged since (same in-place versions)."""
    if len(held) != len(sources):
        return False
    for a, b, version in zip(held, sources, versions):
        if a is not b or tensor_version(b) != version:
            return False
    return True


class Runtime:
    """State shared by the attention modules of one model (kept as a plain attribute, not a submodule)."""

    def __init__(self, mechanism: MechanismConfig, checkpoint_layers: list[nn.Module] = ()):
        self.mechanism = mechanism
        self.recorders: list[GateRecord] = []
        self.output_gates: list[Optional[GateRecord]] = []
        self.gate_override: Optional[float] = None
        self.kernel_cache: dict[str, str] = {}
        self.token = f"runtime-{next(_TOKENS)}"   # names this runtime's entry in _TRACED_KERNELS
        weakref.finalize(self, _TRACED_KERNELS.pop, self.token, None)
        self.window_cache: dict[tuple, torch.Tensor] = {}
        self.base_functions: dict[tuple[type, str], Callable] = {}
        self.call_counter = 0
        self.step = Step()
        # the modules that carry transformers' ``gradient_checkpointing`` flag (read once per step)
        self.checkpoint_layers = list(checkpoint_layers)

    def checkpointing(self) -> bool:
        return any(getattr(m, "gradient_checkpointing", False) for m in self.checkpoint_layers)

    def base_function(self, module: nn.Module, base: str) -> Callable:
        """`stock_function` for this module class, looked up once."""
        key = (type(module), base)
        fn = self.base_functions.get(key)
        if fn is None:
            fn = self.base_functions[key] = stock_function(module, base)
        return fn

    def kernel_for(self, device: torch.device) -> str:
        """The mechanism's kernel resolved for ``device`` (``auto`` -> a kernel name), once per device type.

        While ``torch.compile`` traces, the traced code touches no cache: reading one guards on its contents, and
        filling it on the first step would fail that guard and recompile the whole model on the second step. The
        resolution is then made (and recorded for `kernels_resolved`) by `_resolve_traced`, which
        dynamo runs as plain Python at trace time."""
        key = device.type
        if torch.compiler.is_compiling():
            return _resolve_traced(self.token, self.mechanism.kernel, key)
        if key not in self.kernel_cache:
            self.kernel_cache[key] = resolve_kernel_name(self.mechanism.kernel, device)
        return self.kernel_cache[key]

    def kernels_resolved(self) -> list[str]:
        """The kernel names resolved so far (one per device type the model ran on, eager or compiled)."""
        return list({**_TRACED_KERNELS.get(self.token, {}), **self.kernel_cache}.values())

    def window(self, n: int, m: int, k: int, device: torch.device) -> torch.Tensor:
        """The token window |i - j| <= k as bool [1, 1, n, m]; the
        [`WINDOW_CACHE_SIZE`][structattn.attention.runtime.WINDOW_CACHE_SIZE] most recently used shapes are kept (a dict
        keeps insertion order: the first key is the least recently used)."""
        key = (n, m, k, str(device))
        mask = self.window_cache.pop(key, None)
        if mask is None:
            mask = torch.from_numpy(band(n, m, k)).to(device)[None, None]
        self.window_cache[key] = mask
        while len(self.window_cache) > WINDOW_CACHE_SIZE:
            del self.window_cache[next(iter(self.window_cache))]
        return mask


def runtime_of(model: nn.Module) -> Optional[Runtime]:
    """The structattn state of a model (None when no mechanism is installed); for a wrapper around an encoder
    ([`SGNetModel`][structattn.sgnet.model.SGNetModel]) the state of its ``base_model``."""
    rt = getattr(model, "_structattn_rt", None)
    if rt is None:
        inner = getattr(model, "base_model", None)
        if isinstance(inner, nn.Module) and inner is not model:
            rt = getattr(inner, "_structattn_rt", None)
    return rt
