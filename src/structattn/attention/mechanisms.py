"""Mechanism records: which local pattern, which layers, which gate, which kernel.

A mechanism is a typed record ([`MechanismConfig`][structattn.attention.mechanisms.MechanismConfig]) saved in
``config.json`` under the key ``structattn``. The registry `MECHANISMS` holds the named defaults;
[`get_mechanism`][structattn.attention.mechanisms.get_mechanism] looks a name up and applies option overrides, failing
with the list of valid names or fields.

The local pattern itself is built by the structure pipeline (``structattn.structure``) from
``relation`` and its option (``m`` for ``sla``/``tree``, ``k`` for ``window``) and reaches the model as
``structure_mask [batch, T, T]`` bool (True = query row may attend key column).

Window unit. The ``window`` relation counts either words or tokens (``window_unit``):

* ``"word"`` (``wla``): |i - j| <= k over words, every sub-word of a word shares its row and column and
  special tokens see and are seen by every token (the expansion rules of ``structattn.structure``). The
  committed WLA results used this. It needs word boundaries, so the model call must carry a
  ``structure_mask`` (from `StructureCollator`).
* ``"token"`` (``hybrid``): a band |i - j| <= k over sub-word token positions, special tokens being
  positions like any other (Xu et al.'s local pattern; also the SLA paper's own definition of WLA, which
  ``wla`` with ``window_unit="token"`` gives). The collator and a call without ``structure_mask`` build
  exactly the same band.

Saved configurations from before ``window_unit`` existed load as ``"token"`` for ``hybrid`` and ``"word"``
for every other mechanism (see
[`MechanismConfig.from_dict`][structattn.attention.mechanisms.MechanismConfig.from_dict]).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import UserError

GATE_KINDS = ("token", "head")
MIX_KINDS = ("gate", "local", "concat", "gaussian")
GAUSSIAN_KINDS = ("luong", "sperber", "yang")  # the Gaussian biases of gaussian.GaussianLocality
BASE_NAMES = ("sdpa", "eager")
WINDOW_UNITS = ("word", "token")
from ..structure.relations import RELATIONS  # noqa: E402 - the one registry of relations and their options
RELATION_NAMES = tuple(RELATIONS)
CONFIG_VERSION = 1


@dataclass
class MechanismConfig:
    """Settings of one structure-aware attention mechanism.

    Fields:
        name: registry name (``sla``, ``wla``, ``hybrid``, ``sdoi``, ``global`` or a user's own).
        relation: word relation that builds the local mask (a name of ``structattn.structure.RELATIONS``),
            or None for ``global`` (no local pattern).
        m: distance threshold of ``sla``/``tree`` relations (SLA: D(i, j) <= m).
        k: half-width of the ``window`` relation (|i - j| <= k).
        window_unit: what the ``window`` relation counts: ``"word"`` (words, special tokens visible to all;
            needs ``structure_mask``) or ``"token"`` (a band over token positions, built in the model when no
            ``structure_mask`` is given). Only the ``window`` relation takes ``"token"``.
        layers: encoder layers that mix local and global attention: None = all, an int L = the lowest L
            layers, a list of indices (negative counts from the top).
        gate: ``"token"`` = one gate per token shared by all heads (the papers), ``"head"`` = one per
            token and head.
        gate_bias: initial gate bias b (0 gives g = sigmoid(W h) ~ 0.5 as in the SLA paper; a large negative
            value starts from the pretrained model's behaviour).
        gate_has_bias: whether the gate has a bias (Xu et al.: g = sigmoid(W h), no bias).
        gate_init_std: std of the initial gate weights W (None = the model's ``initializer_range``).
        kernel: ``auto`` (on CPU the fused native kernel when it builds, on CUDA ``triton`` when it passes its
            check, else ``exact``), ``fused``, ``exact`` (two passes of the stock kernel, outputs mixed: bit-exact
            at g = 0), ``shared_exp``, ``reference``, ``flex``, ``triton``
            (`structattn.attention.kernels.KERNEL_NAMES`).
        base: the stock kernel the global part reproduces and whose mask format is used: ``sdpa`` or ``eager``.
        mix: how a mechanism layer combines its patterns (Xu et al. 2019, Table 1): ``gate`` =
            (1 - g) global + g local (Eq. 4; every paper's mechanism), ``local`` = the local pattern alone
            (Eq. 3, LOCAL_PATTERN), ``concat`` = both outputs concatenated and projected back to the hidden
            size (HYBRID (Concate)), ``gaussian`` = global attention with an additive Gaussian locality bias
            on the scores (no local mask; [`gaussian`][structattn.attention.gaussian] names which one).
        gaussian: the Gaussian bias of ``mix="gaussian"``
            ([`structattn.attention.gaussian`][structattn.attention.gaussian]): ``luong`` (predicted centre, fixed
            width), ``sperber`` (centred on the query, predicted width), ``yang`` (both predicted).
        gaussian_window: D of the ``luong`` bias (sigma = D / 2; Luong et al. 2015 chose D = 10).
    """

    name: str = "sla"
    relation: str | None = "sla"
    m: int | None = 3
    k: int | None = None
    window_unit: str = "word"
    layers: int | list[int] | None = None
    gate: str = "token"
    gate_bias: float = 0.0
    gate_has_bias: bool = True
    gate_init_std: float | None = None
    kernel: str = "auto"
    base: str = "sdpa"
    mix: str = "gate"
    gaussian: str | None = None
    gaussian_window: float = 10.0
    version: int = field(default=CONFIG_VERSION)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ checks

    def validate(self) -> None:
        """Raise [`UserError`][structattn.errors.UserError] on a bad value, naming the field and the valid choices."""
        if self.relation is not None and self.relation not in RELATION_NAMES:
            raise UserError(f"mechanism {self.name!r}: unknown relation {self.relation!r}; "
                            f"valid relations: {', '.join(RELATION_NAMES)}")
        if self.gate not in GATE_KINDS:
            raise UserError(f"mechanism {self.name!r}: gate must be one of {', '.join(GATE_KINDS)}, got {self.gate!r}")
        if self.kernel != "auto":  # "auto" is always valid; a named kernel is checked against the registry (torch)
            from .kernels import KERNEL_NAMES

            if self.kernel not in KERNEL_NAMES:
                raise UserError(f"mechanism {self.name!r}: unknown kernel {self.kernel!r}; "
                                f"valid kernels: {', '.join(KERNEL_NAMES)}")
        if self.window_unit not in WINDOW_UNITS:
            raise UserError(f"mechanism {self.name!r}: window_unit must be one of {', '.join(WINDOW_UNITS)}, "
                            f"got {self.window_unit!r}")
        if self.window_unit == "token" and self.relation != "window":
            raise UserError(f"mechanism {self.name!r}: window_unit='token' applies only to relation 'window', not "
                            f"{self.relation!r}; set window_unit='word'")
        self._validate_mix()
        if self.base not in BASE_NAMES:
            raise UserError(f"mechanism {self.name!r}: base must be one of {', '.join(BASE_NAMES)}, got {self.base!r}")
        for key in ("m", "k"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise UserError(f"mechanism {self.name!r}: {key} must be a non-negative integer, got {value!r}")
        for option in RELATIONS[self.relation].options if self.relation is not None else ():
            if getattr(self, option) is None:
                raise UserError(f"mechanism {self.name!r}: relation {self.relation!r} needs {option}")
        if not isinstance(self.gate_bias, (int, float)) or math.isnan(float(self.gate_bias)):
            raise UserError(f"mechanism {self.name!r}: gate_bias must be a number, got {self.gate_bias!r}")
        if not self.gate_has_bias and float(self.gate_bias) != 0.0:
            # A bias-free gate (Xu et al.) has no b to start at gate_bias: refusing beats silently ignoring it.
            raise UserError(f"mechanism {self.name!r}: gate_bias={self.gate_bias:g} needs a gate with a bias, but "
                            "gate_has_bias is False; drop gate_bias or set gate_has_bias=True")
        if self.gate_init_std is not None and (not isinstance(self.gate_init_std, (int, float)) or self.gate_init_std < 0):
            raise UserError(f"mechanism {self.name!r}: gate_init_std must be a non-negative number or None")
        layers = self.layers
        if layers is not None:
            if isinstance(layers, bool):
                raise UserError(f"mechanism {self.name!r}: layers must be None, an int or a list of ints")
            if isinstance(layers, int):
                if layers < 1:
                    raise UserError(f"mechanism {self.name!r}: layers={layers} (the lowest L layers) needs L >= 1")
            elif isinstance(layers, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in layers):
                if not layers:
                    raise UserError(f"mechanism {self.name!r}: layers is an empty list")
                self.layers = list(layers)
            else:
                raise UserError(f"mechanism {self.name!r}: layers must be None, an int or a list of ints, got {layers!r}")

    def _validate_mix(self) -> None:
        """The combination rules of [`mix`][structattn.attention.mechanisms.MechanismConfig.mix],
        [`gaussian`][structattn.attention.gaussian] and `relation`."""
        if self.mix not in MIX_KINDS:
            raise UserError(f"mechanism {self.name!r}: mix must be one of {', '.join(MIX_KINDS)}, got {self.mix!r}")
        if self.mix == "gaussian":
            if self.gaussian not in GAUSSIAN_KINDS:
                raise UserError(f"mechanism {self.name!r}: mix='gaussian' needs gaussian = one of "
                                f"{', '.join(GAUSSIAN_KINDS)}, got {self.gaussian!r}")
            if self.relation is not None:
                raise UserError(f"mechanism {self.name!r}: a Gaussian bias has no local mask; set relation=None "
                                f"(got {self.relation!r})")
            window = self.gaussian_window
            if isinstance(window, bool) or not isinstance(window, (int, float)) or not window > 0:
                raise UserError(f"mechanism {self.name!r}: gaussian_window must be a positive number, got {window!r}")
        elif self.gaussian is not None:
            raise UserError(f"mechanism {self.name!r}: gaussian={self.gaussian!r} needs mix='gaussian' "
                            f"(mix is {self.mix!r})")
        elif self.mix != "gate" and self.relation is None:
            raise UserError(f"mechanism {self.name!r}: mix={self.mix!r} needs a local pattern (a relation)")

    # ------------------------------------------------------------------ derived

    @property
    def is_global(self) -> bool:
        """True when the mechanism changes nothing (no local pattern, no Gaussian bias): the stock model
        through the same code path."""
        return self.relation is None and self.mix != "gaussian"

    @property
    def reads_structure(self) -> bool:
        """True when a model call needs ``structure_mask`` built from a parse (not for a token window or ``all``,
        which the attention function builds itself, nor for a mechanism without a local pattern)."""
        if self.relation is None or self.relation == "all":
            return False
        return not (self.relation == "window" and self.window_unit == "token")

    @property
    def has_gate(self) -> bool:
        """True when mechanism layers compute a gate g (``mix="gate"``)."""
        return self.mix == "gate" and not self.is_global

    def relation_options(self) -> dict[str, int]:
        """The options the structure pipeline needs for `relation` (e.g. ``{"m": 3}``)."""
        if self.relation is None:
            return {}
        return {option: getattr(self, option) for option in RELATIONS[self.relation].options}

    def layer_indices(self, num_layers: int) -> list[int]:
        """Resolve `layers` against a model with ``num_layers`` encoder layers (sorted, unique)."""
        if self.is_global:
            return []
        if self.layers is None:
            return list(range(num_layers))
        if isinstance(self.layers, int):
            if self.layers > num_layers:
                raise UserError(f"mechanism {self.name!r}: layers={self.layers} but the model has {num_layers} layers")
            return list(range(self.layers))
        out = set()
        for i in self.layers:
            j = i + num_layers if i < 0 else i
            if not 0 <= j < num_layers:
                raise UserError(f"mechanism {self.name!r}: layer index {i} out of range for {num_layers} layers")
            out.add(j)
        return sorted(out)

    # ------------------------------------------------------------------ (de)serialisation

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored as ``config.structattn``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MechanismConfig":
        """Inverse of [`to_dict`][structattn.attention.mechanisms.MechanismConfig.to_dict]; unknown keys (from a newer
        version or set by the installer) are ignored.

        A dict without ``window_unit`` gets the unit its model was built for: ``"token"`` for
        ``hybrid`` (Xu et al.'s sub-word window), ``"word"`` otherwise (the committed WLA runs).
        """
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if "window_unit" not in values:
            values["window_unit"] = "token" if values.get("name") == "hybrid" else "word"
        return cls(**values)

    def replace(self, **options: Any) -> "MechanismConfig":
        """A copy with some fields changed; an unknown field fails listing the valid ones."""
        check_options(options)
        return dataclasses.replace(self, **options)


def option_names() -> tuple[str, ...]:
    """The option names a user may set (every field but ``name`` and ``version``)."""
    return tuple(f.name for f in dataclasses.fields(MechanismConfig) if f.name not in ("name", "version"))


def check_options(options: dict[str, Any]) -> None:
    """Fail on option names that are not fields of
    [`MechanismConfig`][structattn.attention.mechanisms.MechanismConfig]."""
    bad = sorted(set(options) - set(option_names()) - {"name"})
    if bad:
        raise UserError(f"unknown mechanism option(s) {', '.join(bad)}; valid options: {', '.join(option_names())}")


MECHANISMS: dict[str, MechanismConfig] = {
    # Li et al. 2021: dependency-tree distance (from i or a neighbour of i) <= m, gate per token, all layers.
    "sla": MechanismConfig(name="sla", relation="sla", m=3),
    # Li et al.'s window baseline (WLA): |i - j| <= k over words (the committed runs; the paper counts tokens:
    # window_unit="token"), same gate.
    "wla": MechanismConfig(name="wla", relation="window", m=None, k=3, window_unit="word"),
    # Xu et al. 2019: band of half-width 1 (their m, k here) over sub-word positions, g = sigmoid(W h) without
    # bias, lowest 2 layers.
    "hybrid": MechanismConfig(name="hybrid", relation="window", m=None, k=1, window_unit="token", layers=2,
                              gate_has_bias=False),
    # SG-Net's SDOI pattern (a word sees itself and its ancestors) used as the local pattern inside the encoder.
    "sdoi": MechanismConfig(name="sdoi", relation="sdoi", m=None),
    # The stock model through the same code path (baselines).
    "global": MechanismConfig(name="global", relation=None, m=None),
    # Xu et al. 2019's comparisons (Table 1), all in the lowest 2 layers over sub-word positions:
    # LOCAL_PATTERN (the band alone, Eq. 3), HYBRID (Concate), and the Gaussian biases NEIGHBOR (Sperber et al.
    # 2018), LOCAL_H (Luong et al. 2015) and LOCAL_S (Yang et al. 2018) (structattn.attention.gaussian).
    "local": MechanismConfig(name="local", relation="window", m=None, k=1, window_unit="token", layers=2,
                             mix="local"),
    "hybrid_concat": MechanismConfig(name="hybrid_concat", relation="window", m=None, k=1, window_unit="token",
                                     layers=2, mix="concat"),
    "gauss_luong": MechanismConfig(name="gauss_luong", relation=None, m=None, layers=2, mix="gaussian",
                                   gaussian="luong"),
    "gauss_sperber": MechanismConfig(name="gauss_sperber", relation=None, m=None, layers=2, mix="gaussian",
                                     gaussian="sperber"),
    "gauss_yang": MechanismConfig(name="gauss_yang", relation=None, m=None, layers=2, mix="gaussian",
                                  gaussian="yang"),
}
"""The named mechanisms (``structattn train --mechanism NAME``, `from_pretrained(..., mechanism=NAME)`): name ->
[`MechanismConfig`][structattn.attention.mechanisms.MechanismConfig]; options given beside a name override its own."""


def get_mechanism(name: str | MechanismConfig | dict, **options: Any) -> MechanismConfig:
    """The registered mechanism ``name`` (or a record/dict) with ``options`` applied.

    Raises:
        UserError: unknown mechanism name (listing the valid names) or unknown option.
    """
    if isinstance(name, MechanismConfig):
        base = name
    elif isinstance(name, dict):
        base = MechanismConfig.from_dict(name)
    else:
        try:
            base = MECHANISMS[name]
        except (KeyError, TypeError):
            raise UserError(f"unknown mechanism {name!r}; valid mechanisms: {', '.join(sorted(MECHANISMS))}") from None
    return base.replace(**options) if options else dataclasses.replace(base)


def describe(names: Sequence[str] | None = None) -> str:
    """A one-line-per-mechanism summary of the registry (for ``--help`` texts)."""
    lines = []
    for key in names or sorted(MECHANISMS):
        c = MECHANISMS[key]
        if c.relation is None:
            rel = "none (stock attention)" if c.is_global else "none"
        else:
            rel = f"{c.relation} {c.relation_options()}"
        if c.relation == "window":
            rel += f" over {c.window_unit}s"
        layers = "all" if c.layers is None else (f"lowest {c.layers}" if isinstance(c.layers, int) else str(c.layers))
        if c.mix == "gate":
            how = f"gate={c.gate}{'' if c.gate_has_bias else ' (no bias)'}"
        elif c.mix == "gaussian":
            how = f"Gaussian bias {c.gaussian}"
        else:
            how = f"mix={c.mix}"
        lines.append(f"{key}: local={rel}, layers={layers}, {how}")
    return "\n".join(lines)
