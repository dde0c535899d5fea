"""The translation model: a transformers MarianMT encoder-decoder made from scratch (its set-up, the joint
BPE and the batches, is `structattn.translation.data`).

Route: ``transformers.MarianMTModel`` built from a `MarianConfig`
(post-LayerNorm Transformer of Vaswani et al., sinusoidal positions, shared and tied embeddings), with the
library's mechanism installed in the encoder self-attention of the chosen layers only
([`structattn.models.encoder.apply_mechanism`][structattn.models.encoder.apply_mechanism]; decoder self- and
cross-attention stay stock). Beam search with a length penalty, ``save_pretrained``/``from_pretrained`` and
``generate()`` come from transformers.

Sizes (`SIZES`): ``tiny`` trains on a 2-core CPU (4+4 layers, d 128, FFN 256, 4 heads, dropout 0.3:
the size reported for Multi30k text-only baselines); ``base`` is the paper's (6+6, 512, FFN 2048, 8 heads,
dropout 0.1) for GPUs.

Variants (`VARIANTS`, the names of ``results/nmt.jsonl``) map onto mechanisms:
``transformer`` is the stock model (no mechanism installed), the others a registry mechanism in the
lowest 2 encoder layers (``layers`` option).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import UserError


@dataclass(frozen=True)
class ModelSize:
    """Encoder-decoder hyper-parameters."""

    encoder_layers: int
    decoder_layers: int
    d_model: int
    ffn: int
    heads: int
    dropout: float
    max_positions: int = 256


SIZES: dict[str, ModelSize] = {
    "tiny": ModelSize(encoder_layers=4, decoder_layers=4, d_model=128, ffn=256, heads=4, dropout=0.3),
    "base": ModelSize(encoder_layers=6, decoder_layers=6, d_model=512, ffn=2048, heads=8, dropout=0.1),
    # for tests and smoke runs only
    "micro": ModelSize(encoder_layers=2, decoder_layers=2, d_model=32, ffn=64, heads=4, dropout=0.1, max_positions=64),
}

#: variant name -> (mechanism name or None for the stock model, options)
VARIANTS: dict[str, tuple[str | None, dict[str, Any]]] = {
    "transformer": (None, {}),
    "local": ("local", {}),
    "hybrid_gate": ("hybrid", {}),
    "hybrid_concat": ("hybrid_concat", {}),
    "luong": ("gauss_luong", {}),
    "sperber": ("gauss_sperber", {}),
    "yang": ("gauss_yang", {}),
    # our extension: Xu et al.'s gate (no bias, lowest 2 layers) with SLA's dependency-distance mask
    "sla": ("sla", {"layers": 2, "gate_has_bias": False}),
}


def variant_mechanism(variant: str, **overrides: Any):
    """The [`MechanismConfig`][structattn.attention.mechanisms.MechanismConfig] of a variant (None for ``transformer``).

    ``overrides`` are mechanism options (``layers``, ``k``, ``gate`` ...) applied on top of the variant's."""
    from ..attention.mechanisms import get_mechanism

    if variant not in VARIANTS:
        raise UserError(f"unknown translation variant {variant!r}; valid variants: {', '.join(VARIANTS)}")
    name, options = VARIANTS[variant]
    if name is None:
        if overrides:
            raise UserError(f"variant 'transformer' is the stock model and takes no mechanism options "
                            f"(got {', '.join(sorted(overrides))})")
        return None
    return get_mechanism(name, **{**options, **overrides})


def build_model(tokenizer, size: str | ModelSize = "tiny", variant: str = "transformer", seed: int = 0, *,
                init: str = "fairseq", residual: str = "plain", embedding_dropout: float | None = None,
                attention_dropout: float = 0.0, activation_dropout: float = 0.0, **mechanism_options: Any):
    """A fresh ``MarianMTModel`` for ``tokenizer``'s vocabulary with ``variant``'s mechanism installed.

    The stock attention is SDPA; every variant other than ``transformer`` runs through structattn's
    attention function in the encoder layers it names (others stay stock).

    ``init`` names an entry of `INITIALISATIONS`, ``residual`` one of `RESIDUALS` (``deepnet``: each
    sublayer's residual weighted as in DeepNet, recorded in the config and restored on loading). Dropout: the size's ``dropout`` on every residual branch;
    ``embedding_dropout`` on the summed word and position embeddings (None: the size's, as Marian applies it),
    ``attention_dropout`` on the attention probabilities and ``activation_dropout`` after the feed-forward ReLU
    (Joey NMT's Transformer: 0, the size's, the size's).
    """
    import torch
    from transformers import MarianConfig, MarianMTModel

    from ..models.encoder import apply_mechanism

    if isinstance(size, str) and size not in SIZES:
        raise UserError(f"unknown model size {size!r}; valid sizes: {', '.join(SIZES)}")
    dims = SIZES[size] if isinstance(size, str) else size
    mechanism = variant_mechanism(variant, **mechanism_options)
    config = MarianConfig(
        vocab_size=len(tokenizer), decoder_vocab_size=len(tokenizer), d_model=dims.d_model,
        encoder_layers=dims.encoder_layers, decoder_layers=dims.decoder_layers,
        encoder_attention_heads=dims.heads, decoder_attention_heads=dims.heads,
        encoder_ffn_dim=dims.ffn, decoder_ffn_dim=dims.ffn, dropout=dims.dropout, attention_dropout=attention_dropout,
        activation_dropout=activation_dropout, activation_function="relu", max_position_embeddings=dims.max_positions,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id, decoder_start_token_id=tokenizer.pad_token_id,
        forced_eos_token_id=tokenizer.eos_token_id, scale_embedding=True, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True, init_std=dims.d_model ** -0.5)
    if init not in INITIALISATIONS:
        raise UserError(f"unknown initialisation {init!r}; valid: {', '.join(INITIALISATIONS)}")
    if residual not in RESIDUALS:
        raise UserError(f"unknown residual weighting {residual!r}; valid: {', '.join(RESIDUALS)}")
    if residual == "deepnet":
        config.residual_scale = deepnet_alpha_beta(dims.encoder_layers, dims.decoder_layers)["alpha"]
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    INITIALISATIONS[init](model)
    apply_residual_scale(model)
    if residual == "deepnet":  # its residual weights need hooks: saved as model_type structattn, AutoModel* refuse it
        from ..models.saved_type import mark

        mark(model.config)
    if embedding_dropout is not None:  # Marian's encoder and decoder use their own `dropout` on the embeddings only
        model.model.encoder.dropout = model.model.decoder.dropout = embedding_dropout
    # Marian keeps a final_logits_bias buffer; it is not trained and stays 0.
    if mechanism is not None:
        apply_mechanism(model, mechanism)
    return model


def untrained_like(model, seed: int = 0):
    """A model of ``model``'s architecture, vocabulary and mechanism with fresh weights, drawn as
    [`build_model`][structattn.translation.model.build_model] draws them (transformers' initialisation, then
    [`fairseq_initialisation`][structattn.translation.model.fairseq_initialisation], then the mechanism's own
    parameters): the untrained-encoder control of probing (Conneau et al. 2018 report untrained encoders beside trained
    ones to show what the probe gets from the architecture alone).
    """
    import torch

    from ..models.encoder import apply_mechanism, mechanism_of

    settings = {k: v for k, v in model.config.to_dict().items() if k != "structattn"}
    config = type(model.config).from_dict(settings)
    torch.manual_seed(seed)
    fresh = type(model)(config)
    fairseq_initialisation(fresh)
    apply_residual_scale(fresh)
    mechanism = mechanism_of(model)
    if mechanism is not None:
        apply_mechanism(fresh, mechanism)
    return fresh.eval()


def fairseq_initialisation(model) -> None:
    """Re-draw the linear layers of a fresh encoder-decoder as fairseq's Transformer does (the toolkit of the
    Multi30k baselines and of Xu et al.): Xavier-uniform weights with gain 1/sqrt(2) for the query, key and
    value projections and gain 1 for the output projections and the feed-forward layers, zero biases. The
    embeddings keep Marian's N(0, init_std = d^-1/2) with a zero padding row, which is fairseq's too; the
    output projection is tied to them.

    Why: Marian's own initialisation draws every linear weight from N(0, init_std). On Multi30k (tiny size,
    lr 5e-3, 2,000 warm-up updates) learnt about half as fast as a plain ``nn.Transformer`` with Xavier
    weights on the same batches (dev NLL per token 3.96 vs 3.44 after 1,000 updates); with this
    initialisation the same Marian model reached 3.58 after 750 updates, where Marian's needed about
    1,500 (3.55).
    """
    import torch
    from torch import nn

    with torch.no_grad():
        for name, module in model.named_modules():
            if not isinstance(module, nn.Linear) or module is model.get_output_embeddings():
                continue
            gain = 1 / math.sqrt(2) if name.endswith(("q_proj", "k_proj", "v_proj")) else 1.0
            nn.init.xavier_uniform_(module.weight, gain=gain)
            if module.bias is not None:
                module.bias.zero_()


def xavier_normal_initialisation(model) -> None:
    """Joey NMT's Transformer initialisation (``initializer: xavier_normal``, gain 1, for the linear layers and
    the shared embeddings; zero biases; a zero padding row). With ``scale_embedding`` the embeddings start
    about 5x smaller than fairseq's N(0, d^-1/2), so the positions dominate the first updates' inputs."""
    _xavier_normal(model, lambda name: 1.0)


def _xavier_normal(model, gain_of) -> None:
    """Xavier-normal linear weights (gain ``gain_of(module name)``) and shared embeddings (gain 1, zero padding
    row), zero biases; the output projection is tied to the embeddings."""
    import torch
    from torch import nn

    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear) and module is not model.get_output_embeddings():
                nn.init.xavier_normal_(module.weight, gain=gain_of(name))
                if module.bias is not None:
                    module.bias.zero_()
        embeddings = model.get_input_embeddings()
        nn.init.xavier_normal_(embeddings.weight)
        if embeddings.padding_idx is not None:
            embeddings.weight[embeddings.padding_idx].zero_()


def deepnet_alpha_beta(encoder_layers: int, decoder_layers: int) -> dict[str, dict[str, float]]:
    """DeepNet's constants for an N-layer encoder and M-layer decoder (Wang et al. 2022, "DeepNet: Scaling
    Transformers to 1,000 Layers", encoder-decoder case), as Joey NMT applies them with ``initializer:
    xavier_normal``: the residual weight alpha and the initialisation gain beta, per stack.
    4 + 4 layers: alpha 1.249 / 1.861, beta 0.564 / 0.380 (encoder / decoder)."""
    n, m = encoder_layers, decoder_layers
    return {"alpha": {"encoder": 0.81 * (n ** 4 * m) ** (1 / 16), "decoder": (3 * m) ** (1 / 4)},
            "beta": {"encoder": 0.87 * (n ** 4 * m) ** (-1 / 16), "decoder": (12 * m) ** (-1 / 4)}}


#: the sublayers whose output is added to a residual in a Marian layer (self-attention, cross-attention, the
#: feed-forward's second linear), and the weights DeepNet draws with gain beta (value and output projections,
#: both feed-forward linears)
_RESIDUAL_BRANCHES = ("self_attn", "encoder_attn", "fc2")
_DEEPNET_BETA_WEIGHTS = ("v_proj", "out_proj", "fc1", "fc2")


def deepnet_initialisation(model) -> None:
    """Joey NMT's Transformer initialisation with ``initializer: xavier_normal`` (which also turns on the DeepNet
    residual weights: ``residual="deepnet"``): Xavier-normal matrices, gain beta
    ([`deepnet_alpha_beta`][structattn.translation.model.deepnet_alpha_beta]) for the value and output projections and
    the feed-forward layers of each stack and gain 1 for the query and key projections; Xavier-normal shared embeddings
    with a zero padding row; zero biases."""
    c = model.config
    beta = deepnet_alpha_beta(c.encoder_layers, c.decoder_layers)["beta"]

    def gain_of(name: str) -> float:
        if not name.endswith(_DEEPNET_BETA_WEIGHTS):
            return 1.0
        return beta["decoder" if ".decoder." in f".{name}" else "encoder"]

    _xavier_normal(model, gain_of)


def _scale_branch(factor: float):
    """Forward hook multiplying a residual branch's output (a tensor, or an attention's (output, weights)) by
    ``factor``."""
    def hook(module, args, output):
        if isinstance(output, tuple):
            return (output[0] * factor, *output[1:])
        return output * factor
    return hook


def apply_residual_scale(model) -> None:
    """Give the model the residual weights its config records (``config.residual_scale``: alpha per stack; none:
    plain residuals). A post-norm layer computes LN(alpha x + F(x)); since LayerNorm ignores a positive factor,
    that is LN(x + F(x) / alpha) (up to LayerNorm's epsilon), so a forward hook divides each residual branch's
    output by alpha and the weights and their names stay Marian's. Idempotent (earlier hooks are replaced)."""
    scale = getattr(model.config, "residual_scale", None)
    for handle in getattr(model, "_structattn_residual_hooks", ()):
        handle.remove()
    model._structattn_residual_hooks = handles = []
    if not scale:
        return
    for stack in ("encoder", "decoder"):
        for layer in getattr(model.model, stack).layers:
            for branch in _RESIDUAL_BRANCHES:
                if hasattr(layer, branch):
                    handles.append(getattr(layer, branch).register_forward_hook(_scale_branch(1 / scale[stack])))


#: ``build_model(init=...)`` / ``train-translation --init``: how a fresh model's weights are drawn
INITIALISATIONS = {"fairseq": fairseq_initialisation, "xavier_normal": xavier_normal_initialisation,
                   "deepnet": deepnet_initialisation}

#: ``build_model(residual=...)`` / ``train-translation --residual``: plain residuals, or DeepNet's weights alpha
RESIDUALS = ("plain", "deepnet")


def size_of(model) -> dict[str, Any]:
    """The model's size as a JSON-ready dict (for results)."""
    c = model.config
    return {"encoder_layers": c.encoder_layers, "decoder_layers": c.decoder_layers, "d_model": c.d_model,
            "ffn": c.encoder_ffn_dim, "heads": c.encoder_attention_heads, "dropout": c.dropout,
            "vocab_size": c.vocab_size, "parameters": sum(p.numel() for p in model.parameters()),
            "mechanism_parameters": sum(p.numel() for n, p in model.named_parameters() if ".structattn_" in n)}
