"""SG-Net's syntax-guided layer and the ways of aggregating it with the encoder output (Zhang et al. 2020).

Notation: b batch, T positions, d hidden size, H heads of size e = d / H, f = intermediate (FFN) size.

The syntax-guided (SDOI-SAN) layer is BERT's post-LN encoder layer whose self-attention is restricted by a
bool mask ``[b, T, T]`` (True = query row may attend key column; SG-Net's SDOI mask: a word sees itself and
its dependency ancestors, special tokens only themselves):

    a  = MultiHead(h; mask)                                 (Eq. 2-3: softmax over the True keys only)
    x  = LN(h + drop(W_o a))
    h' = LN(x + drop(W_2 act(W_1 x)))                        act = the encoder's activation (GELU for BERT)

Two paths compute the attention: the fast one calls SDPA (``torch.nn.functional.scaled_dot_product_attention``),
the plain one ([`reference_masked_attention`][structattn.attention.multihead.reference_masked_attention]) writes the
softmax out; they are tested against each other.

The layer is sized from the encoder's config ([`LayerSizes`][structattn.sgnet.layer.LayerSizes]) and starts either
``fresh`` (BERT's initialisation: normal(0, initializer_range) weights, zero biases, unit LayerNorms; the official code)
or as a ``copy`` of the encoder's last layer ([`copy_last_layer`][structattn.sgnet.layer.copy_last_layer]).

Aggregations (Table 3 of the paper), registry `AGGREGATIONS`; each maps (h [b, T, d] encoder output,
h' [b, T, d] extra-layer output, real [b, T] bool non-padding) to h̄ [b, T, d]:

    dual         h̄ = α h + (1 - α) h'  with α fixed (0.5 in the paper), or, α = None (the official code),
                 h̄ = γ (softmax(w)_0 h + softmax(w)_1 h') with w = [0.5, 0.5] and γ = 1 learned
    sg_only      h̄ = h'                                     ("syntax-guided attention only")
    vanilla      h̄ = h' where the extra layer is UNMASKED    ("vanilla attention only": an extra plain layer)
    concat       h̄ = Linear_{2d -> d}([h; h'])
    biattention  BiDAF attention flow (Seo et al. 2016) with h as context and h' as query:
                 S_tj = w . [h_t; h'_j; h_t * h'_j] over real tokens,
                 ũ_t = sum_j softmax_j(S_tj) h'_j,  h̃ = sum_t softmax_t(max_j S_tj) h_t,
                 h̄ = Linear_{4d -> d}([h; ũ; h * ũ; h * h̃])

[`SyntaxGuidedBlock`][structattn.sgnet.layer.SyntaxGuidedBlock] is the whole SG part (the extra layer plus one
aggregation). Positions outside ``sg_tokens`` ([b, T] bool; the special tokens that see only themselves, and padding:
the paper's footnote 9) take h̄ = h exactly. The ``vanilla`` row has no syntax-guided output, so it ignores
``sg_tokens`` and its mask.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from ..errors import UserError
from ..attention.multihead import masked_attention, merge_heads, reference_masked_attention, split_heads

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------- masks


def check_mask(mask: Tensor, b: int, T: int, name: str = "mask") -> Tensor:
    """``mask`` as bool [b, T, T]; [`UserError`][structattn.errors.UserError] for another shape or a row without any
    True entry.

    A row with no key would make the softmax NaN (SDPA) or arbitrary; SG-Net's rules never build one.
    """
    if not isinstance(mask, torch.Tensor):
        mask = torch.as_tensor(mask)
    if mask.dtype != torch.bool:
        mask = mask != 0
    if tuple(mask.shape) != (b, T, T):
        raise UserError(f"{name} has shape {tuple(mask.shape)}; expected [batch, T, T] = [{b}, {T}, {T}] "
                        "(True = query row may attend key column)")
    empty = ~mask.any(dim=-1)
    if bool(empty.any()):
        ex, pos = (int(i) for i in empty.nonzero()[0])
        raise UserError(f"{name}: {int(empty.sum())} query row(s) may attend nothing (first: example {ex}, position "
                        f"{pos}); every row needs a True entry: build the mask with structattn.structure "
                        "(ExpansionRules.for_relation('sdoi') lets special tokens and padding see themselves)")
    return mask


# --------------------------------------------------------------------------------------------- sizes


@dataclass(frozen=True)
class LayerSizes:
    """Sizes and rates of one encoder layer, read from a transformers config (BERT names, DistilBERT's too)."""

    hidden: int
    heads: int
    intermediate: int
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    activation: str = "gelu"
    initializer_range: float = 0.02

    @classmethod
    def from_config(cls, config: Any) -> "LayerSizes":
        """From ``hidden_size``, ``num_attention_heads``, ``intermediate_size`` (DistilBERT: ``hidden_dim``),
        ``hidden_dropout_prob`` (``dropout``), ``attention_probs_dropout_prob`` (``attention_dropout``),
        ``layer_norm_eps`` (``norm_eps``), ``hidden_act`` (``activation``) and ``initializer_range``."""
        def first(*names: str, default: Any = None) -> Any:
            for name in names:
                value = getattr(config, name, None)
                if value is not None:
                    return value
            return default

        hidden = first("hidden_size", "dim")
        heads = first("num_attention_heads", "n_heads")
        inter = first("intermediate_size", "hidden_dim")
        kind = getattr(config, "model_type", type(config).__name__)
        if not all(isinstance(x, int) for x in (hidden, heads, inter)):
            raise UserError(f"cannot size a syntax-guided layer from the {kind!r} config: it needs hidden_size, "
                            "num_attention_heads and intermediate_size (or DistilBERT's dim, n_heads, hidden_dim)")
        if hidden % heads:
            raise UserError(f"hidden size {hidden} is not a multiple of the {heads} attention heads ({kind!r} config)")
        act = first("hidden_act", "activation", default="gelu")
        from transformers.activations import ACT2FN

        if not isinstance(act, str) or act not in ACT2FN:
            raise UserError(f"activation {act!r} of the {kind!r} config is not one transformers names "
                            f"({', '.join(sorted(ACT2FN))})")
        return cls(hidden=hidden, heads=heads, intermediate=inter,
                   hidden_dropout=float(first("hidden_dropout_prob", "dropout", default=0.1)),
                   attention_dropout=float(first("attention_probs_dropout_prob", "attention_dropout", default=0.1)),
                   layer_norm_eps=float(first("layer_norm_eps", "norm_eps", default=1e-12)),
                   activation=act, initializer_range=float(first("initializer_range", default=0.02)))


def bert_init(module: nn.Module, std: float) -> None:
    """BERT's initialisation in place: Linear weights normal(0, std) and zero biases, LayerNorm (1, 0)."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.normal_(sub.weight, mean=0.0, std=std)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)
        elif isinstance(sub, nn.LayerNorm):
            nn.init.ones_(sub.weight)
            nn.init.zeros_(sub.bias)


# --------------------------------------------------------------------------------------------- the layer


class SyntaxGuidedLayer(nn.Module):
    """BERT's post-LN layer with masked self-attention (module docstring). hidden [b, T, d], mask [b, T, T]
    bool -> [b, T, d].

    Weights: ``query``, ``key``, ``value`` (d -> d), ``attention_output`` (d -> d), ``attention_norm``,
    ``intermediate`` (d -> f), ``output`` (f -> d), ``output_norm``. Starts with
    [`bert_init`][structattn.sgnet.layer.bert_init].
    """

    def __init__(self, sizes: LayerSizes):
        super().__init__()
        from transformers.activations import ACT2FN

        d = sizes.hidden
        self.sizes = sizes
        self.heads = sizes.heads
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.attention_output = nn.Linear(d, d)
        self.attention_norm = nn.LayerNorm(d, eps=sizes.layer_norm_eps)
        self.intermediate = nn.Linear(d, sizes.intermediate)
        self.act = ACT2FN[sizes.activation]
        self.output = nn.Linear(sizes.intermediate, d)
        self.output_norm = nn.LayerNorm(d, eps=sizes.layer_norm_eps)
        self.dropout = nn.Dropout(sizes.hidden_dropout)
        bert_init(self, sizes.initializer_range)

    def forward(self, hidden: Tensor, mask: Tensor, reference: bool = False) -> Tensor:
        """hidden [b, T, d], mask [b, T, T] bool (True = may attend; every row has a True) -> [b, T, d].

        ``reference=True`` runs the plain softmax instead of SDPA (same result; for tests).
        """
        b, T, _ = hidden.shape
        mask = check_mask(mask, b, T).to(hidden.device).unsqueeze(1)  # [b, 1, T, T]: one mask for all heads
        q, k, v = (split_heads(proj(hidden), self.heads) for proj in (self.query, self.key, self.value))
        p = self.sizes.attention_dropout if self.training else 0.0
        attend = reference_masked_attention if reference else masked_attention
        context = merge_heads(attend(q, k, v, mask, dropout_p=p))
        x = self.attention_norm(hidden + self.dropout(self.attention_output(context)))
        return self.output_norm(x + self.dropout(self.output(self.act(self.intermediate(x)))))


# Where each weight of SyntaxGuidedLayer lives in a supported encoder's layer.
_BERT_NAMES = {"query": "attention.self.query", "key": "attention.self.key", "value": "attention.self.value",
               "attention_output": "attention.output.dense", "attention_norm": "attention.output.LayerNorm",
               "intermediate": "intermediate.dense", "output": "output.dense", "output_norm": "output.LayerNorm"}
_DISTILBERT_NAMES = {"query": "attention.q_lin", "key": "attention.k_lin", "value": "attention.v_lin",
                     "attention_output": "attention.out_lin", "attention_norm": "sa_layer_norm",
                     "intermediate": "ffn.lin1", "output": "ffn.lin2", "output_norm": "output_layer_norm"}
#: (where the layer list is in the base model, the weight names inside one layer) per naming family.
COPY_NAMINGS: dict[str, tuple[str, dict[str, str]]] = {
    "bert": ("encoder.layer", _BERT_NAMES),  # BERT, RoBERTa, ELECTRA, XLM-R
    "distilbert": ("transformer.layer", _DISTILBERT_NAMES),
}


def _get(module: nn.Module, dotted: str) -> nn.Module | None:
    for part in dotted.split("."):
        module = getattr(module, part, None) if not part.isdigit() else module[int(part)]
        if module is None:
            return None
    return module


def copy_last_layer(layer: SyntaxGuidedLayer, encoder: nn.Module) -> None:
    """Copy the weights of the encoder's last layer into ``layer`` (in place; ``init="copy"``).

    encoder: a transformers base model (``BertModel`` ...) of the BERT family (BERT, RoBERTa, ELECTRA,
    XLM-R: ``attention.self.query/key/value``, ``attention.output.dense/LayerNorm``, ``intermediate.dense``,
    ``output.dense/LayerNorm``) or DistilBERT (``attention.q_lin`` ..., ``sa_layer_norm``, ``ffn.lin1/lin2``,
    ``output_layer_norm``). Any other encoder: [`UserError`][structattn.errors.UserError]. Gates of an installed
    structattn mechanism are not copied (the layer has none).
    """
    kind = getattr(getattr(encoder, "config", None), "model_type", type(encoder).__name__)
    for list_path, names in COPY_NAMINGS.values():
        layers = _get(encoder, list_path)
        if not isinstance(layers, nn.ModuleList) or not len(layers):
            continue
        last = layers[-1]
        sources = {ours: _get(last, theirs) for ours, theirs in names.items()}
        if any(src is None for src in sources.values()):
            continue
        with torch.no_grad():
            for ours, src in sources.items():
                target = getattr(layer, ours)
                if target.weight.shape != src.weight.shape:
                    raise UserError(f"cannot copy the last {kind!r} layer: its {names[ours]} has shape "
                                    f"{tuple(src.weight.shape)}, the syntax-guided layer's {ours} "
                                    f"{tuple(target.weight.shape)}")
                target.weight.copy_(src.weight)
                target.bias.copy_(src.bias)
        return
    raise UserError(f"init='copy' cannot find the last layer of this {kind!r} encoder: supported are the BERT "
                    "family naming (BERT, RoBERTa, ELECTRA, XLM-R: encoder.layer[-1].attention.self.query ...) and "
                    "DistilBERT's (transformer.layer[-1].attention.q_lin ...); use init='fresh'")


# --------------------------------------------------------------------------------------------- aggregations


class DualAggregation(nn.Module):
    """h̄ = α h + (1 - α) h' (α fixed), or with α None the official code's learned
    h̄ = γ (softmax(w)_0 h + softmax(w)_1 h'), w = [0.5, 0.5] and γ = 1 at the start.

    h, h2 [b, T, d], real [b, T] bool (unused) -> [b, T, d].
    """

    def __init__(self, sizes: LayerSizes, alpha: float | None = 0.5):
        super().__init__()
        if alpha is not None and not 0.0 <= float(alpha) <= 1.0:
            raise UserError(f"dual aggregation: alpha={alpha} must lie in [0, 1] (or be None: learned weights)")
        self.alpha = None if alpha is None else float(alpha)
        if self.alpha is None:
            self.w = nn.Parameter(torch.tensor([0.5, 0.5]))
            self.gamma = nn.Parameter(torch.ones(1))

    def forward(self, h: Tensor, h2: Tensor, real: Tensor) -> Tensor:
        if self.alpha is not None:
            return self.alpha * h + (1.0 - self.alpha) * h2
        w = torch.softmax(self.w, dim=0).to(h.dtype)
        return self.gamma.to(h.dtype) * (w[0] * h + w[1] * h2)


class SecondAggregation(nn.Module):
    """h̄ = h' (rows ``sg_only`` and ``vanilla``). h, h2 [b, T, d], real [b, T] -> h2."""

    def __init__(self, sizes: LayerSizes, alpha: float | None = None):
        super().__init__()

    def forward(self, h: Tensor, h2: Tensor, real: Tensor) -> Tensor:
        return h2


class ConcatAggregation(nn.Module):
    """h̄ = Linear_{2d -> d}([h; h']) (``project``, BERT-initialised). h, h2 [b, T, d], real [b, T] -> [b, T, d]."""

    def __init__(self, sizes: LayerSizes, alpha: float | None = None):
        super().__init__()
        self.project = nn.Linear(2 * sizes.hidden, sizes.hidden)
        bert_init(self, sizes.initializer_range)

    def forward(self, h: Tensor, h2: Tensor, real: Tensor) -> Tensor:
        return self.project(torch.cat([h, h2], dim=-1))


class BiAttentionAggregation(nn.Module):
    """BiDAF's attention flow (Seo et al. 2016) with h the context and h' the query (module docstring).

    Weights: ``similarity`` (the trilinear w = [w_h; w_q; w_hq] of length 3d, no bias: a constant would cancel
    in both softmaxes) and ``project`` (4d -> d). h, h2 [b, T, d], real [b, T] bool -> [b, T, d]; only real
    tokens are attended (as queries' keys and in the query-to-context softmax). Every example needs one real
    token.
    """

    def __init__(self, sizes: LayerSizes, alpha: float | None = None):
        super().__init__()
        self.similarity = nn.Linear(3 * sizes.hidden, 1, bias=False)
        self.project = nn.Linear(4 * sizes.hidden, sizes.hidden)
        bert_init(self, sizes.initializer_range)

    def scores(self, h: Tensor, h2: Tensor) -> Tensor:
        """S [b, T, T]: S_tj = w_h . h_t + w_q . h'_j + w_hq . (h_t * h'_j), without the [b, T, T, 3d] tensor."""
        w_h, w_q, w_hq = self.similarity.weight[0].chunk(3)
        return (h @ w_h).unsqueeze(2) + (h2 @ w_q).unsqueeze(1) + torch.matmul(h * w_hq, h2.transpose(1, 2))

    def forward(self, h: Tensor, h2: Tensor, real: Tensor) -> Tensor:
        s = self.scores(h, h2).masked_fill(~real.unsqueeze(1), float("-inf"))  # only real query tokens j
        u = torch.matmul(torch.softmax(s, dim=-1), h2)  # context-to-query ũ [b, T, d]
        best = s.max(dim=-1).values.masked_fill(~real, float("-inf"))  # [b, T]; only real context tokens t
        h_tilde = torch.matmul(torch.softmax(best, dim=-1).unsqueeze(1), h)  # query-to-context h̃ [b, 1, d]
        return self.project(torch.cat([h, u, h * u, h * h_tilde], dim=-1))


AggregationFactory = Callable[[LayerSizes, "float | None"], nn.Module]

#: aggregation name -> module factory ``(sizes, alpha) -> module(h, h2, real)``; "none" (no SG part) is
#: handled by the model, not here.
AGGREGATIONS: dict[str, AggregationFactory] = {
    "dual": DualAggregation,
    "sg_only": SecondAggregation,
    "vanilla": SecondAggregation,
    "concat": ConcatAggregation,
    "biattention": BiAttentionAggregation,
}

from .names import INITS  # noqa: E402  (re-exported)


# --------------------------------------------------------------------------------------------- the SG part


class SyntaxGuidedBlock(nn.Module):
    """The SG part of SG-Net: the extra layer on the encoder output and one aggregation.

    Args:
        sizes: the encoder's layer sizes ([`LayerSizes.from_config`][structattn.sgnet.layer.LayerSizes.from_config]).
        aggregation: a key of `AGGREGATIONS`; ``vanilla`` makes the extra layer unmasked.
        alpha: the ``dual`` weight α (None = learned, the official code); unused by the other aggregations.

    Submodules: ``layer`` ([`SyntaxGuidedLayer`][structattn.sgnet.layer.SyntaxGuidedLayer]) and ``aggregation``. Call
    [`init_from`][structattn.sgnet.layer.SyntaxGuidedBlock.init_from] to start ``layer`` as a copy of an encoder's last
    layer.
    """

    def __init__(self, sizes: LayerSizes, aggregation: str = "dual", alpha: float | None = 0.5):
        super().__init__()
        if aggregation not in AGGREGATIONS:
            raise UserError(f"unknown aggregation {aggregation!r}; valid aggregations: {', '.join(AGGREGATIONS)} "
                            "(or 'none' for the model without the SG part)")
        self.kind = aggregation
        self.layer = SyntaxGuidedLayer(sizes)
        self.aggregation = AGGREGATIONS[aggregation](sizes, alpha)

    @property
    def masked(self) -> bool:
        """False for ``vanilla`` (its extra layer sees every real token and needs no SG mask)."""
        return self.kind != "vanilla"

    def init_from(self, init: str, encoder: nn.Module | None = None) -> None:
        """``fresh``: keep BERT's initialisation; ``copy``: the layer becomes the encoder's last layer."""
        if init not in INITS:
            raise UserError(f"unknown init {init!r}; valid inits: {', '.join(INITS)}")
        if init == "copy":
            if encoder is None:
                raise ValueError("init='copy' needs the encoder")
            copy_last_layer(self.layer, encoder)

    def attention_mask(self, real: Tensor, sg_mask: Tensor | None) -> Tensor:
        """The extra layer's mask [b, T, T] bool from real [b, T] bool and sg_mask [b, T, T] (or None).

        Keys are limited to real tokens; padded query rows see every real token (their outputs are never used,
        but their rows must not be empty). ``vanilla``: every real key for every row.
        """
        b, T = real.shape
        keys = real.unsqueeze(1).expand(b, T, T)
        if not self.masked:
            return keys
        if sg_mask is None:
            raise UserError(f"aggregation {self.kind!r} needs sg_mask=[batch, T, T] bool (SG-Net's SDOI mask: build "
                            "it with relation 'sdoi' and ExpansionRules.for_relation('sdoi'))")
        mask = check_mask(sg_mask, b, T, "sg_mask").to(real.device) & keys
        return torch.where(real.unsqueeze(2), mask, keys)

    def forward(self, hidden: Tensor, real: Tensor, sg_mask: Tensor | None = None, sg_tokens: Tensor | None = None,
                reference: bool = False) -> Tensor:
        """h̄ [b, T, d] from the encoder output hidden [b, T, d].

        real [b, T] bool (non-padding); sg_mask [b, T, T] bool (needed unless ``vanilla``); sg_tokens [b, T]
        bool or None (= all): positions where h̄ is used, the others keep h exactly (ignored by ``vanilla``).
        """
        b, T, _ = hidden.shape
        real = real.to(device=hidden.device, dtype=torch.bool)
        h2 = self.layer(hidden, self.attention_mask(real, sg_mask), reference=reference)
        out = self.aggregation(hidden, h2, real)
        if sg_tokens is None or not self.masked:
            return out
        if tuple(sg_tokens.shape) != (b, T):
            raise UserError(f"sg_tokens has shape {tuple(sg_tokens.shape)}; expected [batch, T] = [{b}, {T}]")
        keep = sg_tokens.to(device=hidden.device, dtype=torch.bool).unsqueeze(-1)
        return torch.where(keep, out, hidden)


__all__ = ["AGGREGATIONS", "BiAttentionAggregation", "COPY_NAMINGS", "ConcatAggregation", "DualAggregation", "INITS",
           "LayerSizes", "SecondAggregation", "SyntaxGuidedBlock", "SyntaxGuidedLayer", "bert_init", "check_mask",
           "copy_last_layer"]
