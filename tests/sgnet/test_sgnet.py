"""SG-Net model: heads, aggregations, save/load, stock transformers loading, composition with a mechanism."""
from __future__ import annotations

import json
import warnings

import pytest
import torch
import transformers as T

from structattn.errors import UserError
from structattn.sgnet.model import SGNetConfig, SGNetModel

B, L = 2, 8
COMMON = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=64)


def bert(seed: int = 0):
    torch.manual_seed(seed)
    return T.BertModel(T.BertConfig(**COMMON)).eval()


def distilbert(seed: int = 0):
    torch.manual_seed(seed)
    return T.DistilBertModel(T.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                                max_position_embeddings=64)).eval()


def model(encoder=None, seed: int = 1, **cfg) -> SGNetModel:
    encoder = encoder if encoder is not None else bert()
    torch.manual_seed(seed)
    return SGNetModel(encoder, SGNetConfig(**cfg)).eval()


def batch(lead=(B,), t: int = L, seed: int = 2):
    """input_ids / attention_mask / token_type_ids [*lead, t] (the last example padded from t - 3), sg_mask
    [*lead, t, t] (diagonal plus random links) and sg_tokens [*lead, t] (real tokens but position 0)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (*lead, t), generator=g)
    att = torch.ones(*lead, t, dtype=torch.long)
    att.view(-1, t)[-1, t - 3:] = 0
    types = torch.zeros(*lead, t, dtype=torch.long)
    types[..., t // 2:] = 1
    sg = (torch.rand(*lead, t, t, generator=g) < 0.3) | torch.eye(t, dtype=torch.bool)
    tokens = att.bool().clone()
    tokens[..., 0] = False
    return dict(input_ids=ids, attention_mask=att, token_type_ids=types, sg_mask=sg, sg_tokens=tokens)


def perturb(m: torch.nn.Module, seed: int = 3) -> None:
    """Move every parameter off its initial value (learned dual weights, zero biases ...)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))


def logits_of(out):
    return out.start_logits if "start_logits" in out else out.logits


# ----------------------------------------------------------------------------------------- config


def test_config_checks_and_json():
    for bad, match in ((dict(aggregation="sum"), "aggregation 'sum'; valid: none, dual, sg_only, vanilla, concat"),
                       (dict(init="zeros"), "valid: fresh, copy"), (dict(head="ner"), "valid: span_qa"),
                       (dict(alpha=2.0), "alpha"), (dict(num_labels=0), "num_labels"), (dict(dropout=1.0), "dropout")):
        with pytest.raises(UserError, match=match):
            SGNetConfig(**bad)
    cfg = SGNetConfig(aggregation="concat", alpha=None, init="copy", head="tagging", num_labels=5, dropout=0.2)
    assert SGNetConfig.from_dict(json.loads(cfg.to_json())) == cfg
    with pytest.raises(UserError, match="unknown key"):
        SGNetConfig.from_dict({"aggregaton": "dual"})
    with pytest.raises(UserError, match="unknown aggregation"):
        SGNetConfig.from_dict({"aggregation": "sum"})


# ----------------------------------------------------------------------------------------- save / load


@pytest.mark.parametrize("aggregation,alpha", [("none", 0.5), ("dual", 0.5), ("dual", None), ("sg_only", 0.5),
                                               ("vanilla", 0.5), ("concat", 0.5), ("biattention", 0.5)])
def test_round_trip_every_aggregation(tmp_path, aggregation, alpha):
    m = model(aggregation=aggregation, alpha=alpha)
    perturb(m)
    inputs = batch()
    m.save_pretrained(tmp_path)
    loaded = SGNetModel.from_pretrained(tmp_path)
    assert loaded.config == m.config and not loaded.training
    for key, value in m.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    with torch.no_grad():
        a, b = m(**inputs), loaded(**inputs)
    assert torch.equal(a.start_logits, b.start_logits) and torch.equal(a.end_logits, b.end_logits)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["structattn_sgnet"]["aggregation"] == aggregation
    # an SG part saves as model_type structattn (AutoModel* refuse it); the baseline stays the stock type
    assert saved["model_type"] == ("bert" if aggregation == "none" else "structattn")


@pytest.mark.parametrize("aggregation", ["none", "dual"])
def test_an_encoder_stored_in_bfloat16_loads_and_reloads_in_float32(tmp_path, aggregation):
    # transformers v5 keeps a checkpoint's stored dtype: a bfloat16 encoder under a float32 head failed in the head
    bert().to(torch.bfloat16).save_pretrained(tmp_path / "encoder")
    m = SGNetModel.from_encoder(str(tmp_path / "encoder"), SGNetConfig(aggregation=aggregation))
    assert {p.dtype for p in m.parameters()} == {torch.float32}
    with torch.no_grad():
        want = m.eval()(**batch()).start_logits
    m.save_pretrained(tmp_path / "run")
    loaded = SGNetModel.from_pretrained(tmp_path / "run")
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    with torch.no_grad():
        assert torch.equal(loaded(**batch()).start_logits, want)


@pytest.mark.parametrize("head,lead", [("multiple_choice", (B, 3)), ("classification", (B,)), ("tagging", (B,))])
def test_round_trip_every_head(tmp_path, head, lead):
    m = model(aggregation="dual", alpha=None, head=head, num_labels=3)
    perturb(m)
    inputs = batch(lead)
    inputs["sg_tokens"][..., 0] = True  # the pooled heads read position 0
    m.save_pretrained(tmp_path)
    loaded = SGNetModel.from_pretrained(tmp_path)
    with torch.no_grad():
        assert torch.equal(m(**inputs).logits, loaded(**inputs).logits)


def test_automodel_refuses_an_sg_part_and_from_pretrained_takes_the_encoder(tmp_path):
    from structattn.errors import UserError
    from structattn.models.encoder import load_as_saved

    for head in ("span_qa", "multiple_choice"):
        m = model(aggregation="dual", head=head)
        perturb(m)
        m.save_pretrained(tmp_path / head)
        keys = set(m.state_dict())
        assert any(k.startswith("sgnet.layer.") for k in keys) and all(
            k.split(".")[0] in ("bert", "sgnet", "qa_outputs", "classifier", "dropout") for k in keys)
        with pytest.raises(UserError, match="SG-Net.*SGNetModel.from_pretrained"):
            T.AutoModel.from_pretrained(tmp_path / head)
        encoder = load_as_saved(str(tmp_path / head)).eval()  # the encoder part, on purpose
        ours = m.base_model.state_dict()
        for key, value in encoder.state_dict().items():
            if key.startswith("pooler.") and head == "span_qa":  # the QA head drops the unused pooler
                assert "pooler.dense.weight" not in ours
                continue
            assert torch.equal(value, ours[key]), key


def test_baseline_is_a_stock_qa_model(tmp_path):
    m = model(aggregation="none")
    perturb(m)
    m.save_pretrained(tmp_path)
    stock = T.AutoModelForQuestionAnswering.from_pretrained(tmp_path).eval()
    inputs = batch()
    starts, ends = torch.tensor([1, L + 4]), torch.tensor([3, 2])  # one position past T: ignored
    with torch.no_grad():
        ours = m(**inputs, start_positions=starts.clone(), end_positions=ends.clone())
        theirs = stock(**{k: inputs[k] for k in ("input_ids", "attention_mask", "token_type_ids")},
                       start_positions=starts.clone(), end_positions=ends.clone())
    torch.testing.assert_close(ours.start_logits, theirs.start_logits, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ours.end_logits, theirs.end_logits, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ours.loss, theirs.loss, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("head,auto,lead", [("multiple_choice", T.AutoModelForMultipleChoice, (B, 3)),
                                            ("classification", T.AutoModelForSequenceClassification, (B,))])
def test_baseline_pooled_heads_are_stock_models(tmp_path, head, auto, lead):
    m = model(aggregation="none", head=head, num_labels=3)
    perturb(m)
    m.save_pretrained(tmp_path)
    stock = auto.from_pretrained(tmp_path).eval()
    inputs = batch(lead)
    labels = torch.tensor([2, 0])
    with torch.no_grad():
        ours = m(**inputs, labels=labels)
        theirs = stock(**{k: inputs[k] for k in ("input_ids", "attention_mask", "token_type_ids")}, labels=labels)
    torch.testing.assert_close(ours.logits, theirs.logits, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ours.loss, theirs.loss, atol=1e-6, rtol=1e-6)


def test_from_pretrained_errors(tmp_path):
    with pytest.raises(UserError, match="not a saved SG-Net model"):
        SGNetModel.from_pretrained(tmp_path)
    bert().save_pretrained(tmp_path)
    with pytest.raises(UserError, match="no 'structattn_sgnet' entry"):
        SGNetModel.from_pretrained(tmp_path)


# ----------------------------------------------------------------------------------------- behaviour


def test_all_true_sg_mask_equals_an_unmasked_layer():
    sg_only = model(aggregation="sg_only")
    perturb(sg_only)
    vanilla = model(aggregation="vanilla", encoder=bert(seed=5), seed=6)
    vanilla.load_state_dict(sg_only.state_dict())
    inputs = batch()
    inputs["sg_mask"] = torch.ones(B, L, L, dtype=torch.bool)
    inputs["sg_tokens"] = None
    with torch.no_grad():
        torch.testing.assert_close(sg_only(**inputs).start_logits, vanilla(**inputs).start_logits)


@pytest.mark.parametrize("aggregation", ["dual", "sg_only", "concat", "biattention"])
def test_tokens_outside_sg_tokens_get_the_encoder_output(aggregation):
    m = model(aggregation=aggregation)
    inputs = batch()
    keep = inputs["sg_tokens"]
    with torch.no_grad():
        hbar, enc = m.sequence_output(**inputs)
    h = enc.last_hidden_state
    assert torch.equal(hbar[~keep], h[~keep])
    assert not torch.allclose(hbar[keep], h[keep])


def test_dual_with_alpha_one_is_the_baseline():
    dual = model(aggregation="dual", alpha=1.0)
    base = model(aggregation="none", encoder=bert(seed=5), seed=6)
    base.load_state_dict({k: v for k, v in dual.state_dict().items() if not k.startswith("sgnet.")})
    inputs = batch()
    inputs["sg_tokens"] = None
    with torch.no_grad():
        hbar, enc = dual.sequence_output(**inputs)
        assert torch.equal(hbar, enc.last_hidden_state)
        assert torch.equal(dual(**inputs).start_logits, base(**inputs).start_logits)


def test_sg_mask_is_required_unless_none_or_vanilla():
    inputs = batch()
    del inputs["sg_mask"]
    with pytest.raises(UserError, match="needs sg_mask"):
        model(aggregation="dual")(**inputs)
    for aggregation in ("none", "vanilla"):
        model(aggregation=aggregation)(**inputs)


def test_copy_init_takes_the_last_layer():
    m = model(aggregation="dual", init="copy")
    last = m.base_model.encoder.layer[-1]
    assert torch.equal(m.sgnet.layer.query.weight, last.attention.self.query.weight)
    assert torch.equal(m.sgnet.layer.output_norm.bias, last.output.LayerNorm.bias)


def test_composition_with_sla_mechanism(tmp_path):
    enc_dir = tmp_path / "encoder"
    bert().save_pretrained(enc_dir)
    m = SGNetModel.from_encoder(str(enc_dir), SGNetConfig(aggregation="dual"), mechanism="sla", m=2).eval()
    from structattn.models.encoder import gate_parameters

    gates = gate_parameters(m.base_model)
    assert len(gates) >= 2
    perturb(m)
    inputs = batch()
    structure = (torch.rand(B, L, L, generator=torch.Generator().manual_seed(7)) < 0.4) | torch.eye(L, dtype=torch.bool)
    with pytest.raises(UserError, match="structure_mask"):
        m(**inputs)
    with torch.no_grad():
        out = m(**inputs, structure_mask=structure, output_gates=True)
    assert len(out["gates"]) == 2 and out["gates"][0].shape == (B, L)
    m.save_pretrained(tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["structattn"]["name"] == "sla" and saved["structattn"]["m"] == 2
    loaded = SGNetModel.from_pretrained(tmp_path / "run")
    for a, b in zip(gates, gate_parameters(loaded.base_model)):
        assert torch.equal(a, b)
    with torch.no_grad():
        assert torch.equal(loaded(**inputs, structure_mask=structure).start_logits,
                           m(**inputs, structure_mask=structure).start_logits)


def test_multiple_choice_flattening_equals_each_option_alone():
    m = model(aggregation="biattention", head="multiple_choice")
    perturb(m)
    inputs = batch((B, 3))
    inputs["sg_tokens"][..., 0] = True
    labels = torch.tensor([1, 2])
    with torch.no_grad():
        out = m(**inputs, labels=labels)
        assert out.logits.shape == (B, 3)
        for i in range(B):
            for c in range(3):
                one = {k: v[i:i + 1, c:c + 1] for k, v in inputs.items()}
                torch.testing.assert_close(m(**one).logits[0, 0], out.logits[i, c], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))
    with pytest.raises(UserError, match=r"\[batch, choices, T\]"):
        m(**batch())


def test_pooled_head_warns_when_cls_is_left_out():
    m = model(aggregation="dual", head="multiple_choice")
    inputs = batch((B, 2))
    with pytest.warns(UserWarning, match="does not reach the logits"):
        m(**inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m(**inputs)  # once only


def test_mean_pooling_reads_the_real_tokens_and_lets_the_sg_layer_reach_the_logits():
    inputs = batch()
    m = model(aggregation="dual", head="classification", pool="mean")
    perturb(m)
    hbar, _ = m.sequence_output(**inputs)
    real = inputs["attention_mask"].unsqueeze(-1).float()
    mean = (hbar * real).sum(1) / real.sum(1)
    dense = m.base_model.pooler.dense
    expected = m.classifier(torch.tanh(dense(mean)))
    assert torch.allclose(m(**inputs).logits, expected, atol=1e-6)
    # Padding does not change the pooled vector: drop the padded positions of the last example.
    last = {k: v[-1:, :L - 3] if v.dim() == 2 else v[-1:, :L - 3, :L - 3] for k, v in inputs.items()}
    assert torch.allclose(m(**last).logits, m(**inputs).logits[-1:], atol=1e-5)
    # [CLS] (position 0) is outside sg_tokens, yet the SG layer changes the logits through the words.
    changed = dict(inputs, sg_mask=torch.eye(L, dtype=torch.bool).expand(B, L, L))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "does not reach the logits" warning with mean pooling
        assert not torch.allclose(m(**changed).logits, m(**inputs).logits)


def test_classification_and_tagging_losses():
    inputs = batch()
    inputs["sg_tokens"] = None
    reg = model(aggregation="sg_only", head="classification", num_labels=1)
    target = torch.tensor([0.5, -1.0])
    out = reg(**inputs, labels=target)
    assert out.logits.shape == (B, 1)
    torch.testing.assert_close(out.loss, torch.nn.functional.mse_loss(out.logits[:, 0], target))
    tag = model(aggregation="concat", head="tagging", num_labels=4)
    labels = torch.randint(0, 4, (B, L))
    labels[:, 0] = -100
    labels[1, L - 3:] = -100
    out = tag(**inputs, labels=labels)
    assert out.logits.shape == (B, L, 4)
    keep = labels != -100
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits[keep], labels[keep]))


def test_distilbert_encoder_with_its_own_pooler(tmp_path):
    m = model(encoder=distilbert(), aggregation="dual", head="classification", num_labels=2, init="copy")
    perturb(m)
    assert "pooler.dense.weight" in m.state_dict()
    inputs = batch()  # token_type_ids are dropped: DistilBERT has none
    inputs["sg_tokens"][:, 0] = True
    m.save_pretrained(tmp_path)
    loaded = SGNetModel.from_pretrained(tmp_path)
    with torch.no_grad():
        assert torch.equal(m(**inputs).logits, loaded(**inputs).logits)
    assert any(k.startswith("distilbert.transformer.") for k in m.state_dict())
