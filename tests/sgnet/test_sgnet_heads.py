"""SG-Net's head classes: which class a config builds, each head's logits and loss against a plain computation on
the aggregated states h̄, and a save/load round trip per head."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from structattn.errors import UserError
from structattn.sgnet.model import (HEADS, POOLS, SGNET_HEADS, SGNetConfig, SGNetForMultipleChoice,
                                    SGNetForSequenceClassification, SGNetForSpanQA, SGNetForTagging, SGNetModel)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_sgnet import L, batch, bert, perturb  # noqa: E402

B, C = 2, 3
EXPECTED_CLASSES = {"span_qa": SGNetForSpanQA, "multiple_choice": SGNetForMultipleChoice,
                    "classification": SGNetForSequenceClassification, "tagging": SGNetForTagging}
#: (head, num_labels, pool) for every head and every pool it takes; classification with 1 label = regression
CASES = [("span_qa", 2, "first"), ("span_qa", 2, "mean"), ("tagging", 4, "first"), ("tagging", 4, "mean"),
         ("classification", 3, "first"), ("classification", 3, "mean"), ("classification", 1, "first"),
         ("classification", 1, "mean")] + [("multiple_choice", 1, pool) for pool in POOLS]


def build(head: str, num_labels: int, pool: str = "first", aggregation: str = "dual") -> SGNetModel:
    """A tiny SG-Net on a random BERT, every parameter moved off its initial value (biases are zero at first)."""
    encoder = bert()
    torch.manual_seed(1)
    m = SGNetModel(encoder, SGNetConfig(aggregation=aggregation, head=head, num_labels=num_labels, pool=pool))
    perturb(m)
    return m.eval()


def inputs_for(head: str) -> dict:
    """Inputs [B, T] ([B, C, T] for multiple choice; the last sequence padded from L - 3), an SG mask and every
    real token in sg_tokens, the head's labels and, for multiple choice, the option's tokens (pool_mask)."""
    out = batch((B, C) if head == "multiple_choice" else (B,), seed=7)
    out["sg_tokens"][..., 0] = True  # the pooled heads read position 0
    g = torch.Generator().manual_seed(8)
    if head == "span_qa":
        out.update(start_positions=torch.tensor([1, L + 2]), end_positions=torch.tensor([3, 4]))  # L + 2: ignored
    elif head == "tagging":
        labels = torch.randint(0, 4, (B, L), generator=g)
        labels[:, 0] = -100
        out["labels"] = labels
    elif head == "multiple_choice":
        pool_mask = torch.zeros(B, C, L, dtype=torch.bool)
        pool_mask[..., 5:7] = True
        out.update(labels=torch.tensor([2, 0]), pool_mask=pool_mask)
    return out


def hbar_of(m: SGNetModel, inputs: dict) -> torch.Tensor:
    """h̄ [n, T, d] for the inputs flattened to n sequences (n = B, or B·C for multiple choice)."""
    keys = ("input_ids", "attention_mask", "token_type_ids", "sg_mask", "sg_tokens")
    flat = {k: inputs[k].reshape(-1, *inputs[k].shape[-(2 if k == "sg_mask" else 1):]) for k in keys}
    return m.sequence_output(**flat)[0]


def pooled_logits(m: SGNetModel, inputs: dict, hbar: torch.Tensor) -> torch.Tensor:
    """classifier(tanh(pooler(x))), x = h̄ at [CLS], or the mean over the real tokens or the option's tokens."""
    if m.config.pool == "first":
        x = hbar[:, 0]
    else:
        tokens = inputs["pool_mask"] if m.config.pool == "option" else inputs["attention_mask"] != 0
        w = tokens.reshape(hbar.shape[0], L, 1).float()
        x = (hbar * w).sum(1) / w.sum(1)
    return m.classifier(torch.tanh(m.base_model.pooler.dense(x)))


def expected_outputs(m: SGNetModel, inputs: dict) -> dict[str, torch.Tensor]:
    """The head's logits and loss written out from h̄ (transformers' task classes' definitions)."""
    hbar = hbar_of(m, inputs)
    head, labels = m.config.head, inputs.get("labels")
    if head == "span_qa":
        start, end = m.qa_outputs(hbar).unbind(-1)
        s, e = inputs["start_positions"].clamp(0, L), inputs["end_positions"].clamp(0, L)
        loss = (F.cross_entropy(start, s, ignore_index=L) + F.cross_entropy(end, e, ignore_index=L)) / 2
        return dict(start_logits=start, end_logits=end, loss=loss)
    if head == "tagging":
        logits = m.classifier(hbar)
        keep = labels != -100
        return dict(logits=logits, loss=F.cross_entropy(logits[keep], labels[keep]))
    logits = pooled_logits(m, inputs, hbar)
    if head == "multiple_choice":
        logits = logits.reshape(B, C)
        return dict(logits=logits, loss=F.cross_entropy(logits, labels))
    if m.config.num_labels == 1:
        target = torch.tensor([0.5, -1.0])
        inputs["labels"] = target
        return dict(logits=logits, loss=F.mse_loss(logits[:, 0], target))
    target = torch.tensor([2, 0])
    inputs["labels"] = target
    return dict(logits=logits, loss=F.cross_entropy(logits, target))


def test_the_registry_names_every_head_once():
    assert SGNET_HEADS == EXPECTED_CLASSES and HEADS == tuple(SGNET_HEADS)
    for name, cls in SGNET_HEADS.items():
        assert cls.head_name == name and issubclass(cls, SGNetModel)
    with pytest.raises(UserError, match="unknown head 'ner'; valid: span_qa, multiple_choice"):
        SGNetModel.head_class("ner")


@pytest.mark.parametrize("head,num_labels,pool", CASES)
@pytest.mark.parametrize("aggregation", ["none", "dual"])
def test_head_outputs_equal_a_plain_computation(head, num_labels, pool, aggregation):
    m = build(head, num_labels, pool, aggregation)
    assert type(m) is EXPECTED_CLASSES[head] and isinstance(m, SGNetModel)
    assert (m.sgnet is None) == (aggregation == "none")
    inputs = inputs_for(head)
    with torch.no_grad():
        want = expected_outputs(m, inputs)
        got = m(**inputs)
    assert set(want) == {k for k in got.keys()}
    for key, value in want.items():
        torch.testing.assert_close(got[key], value, atol=1e-6, rtol=1e-6, msg=lambda msg: f"{key}: {msg}")


@pytest.mark.parametrize("head,num_labels", [("span_qa", 2), ("multiple_choice", 1), ("classification", 3),
                                             ("classification", 1), ("tagging", 4)])
def test_each_head_owns_only_its_modules(head, num_labels):
    names = {n.split(".")[0] if not n.startswith("bert.pooler") else "bert.pooler"
             for n in build(head, num_labels).state_dict()}
    own = {"span_qa": {"qa_outputs"}, "tagging": {"classifier"}}.get(head, {"classifier", "bert.pooler"})
    assert names == {"bert", "sgnet"} | own


@pytest.mark.parametrize("head,num_labels,pool", CASES)
def test_save_and_load_round_trip_every_head(tmp_path, head, num_labels, pool):
    m = build(head, num_labels, pool)
    m.save_pretrained(tmp_path)
    loaded = SGNetModel.from_pretrained(tmp_path)
    assert type(loaded) is type(m) and loaded.config == m.config and not loaded.training
    assert loaded.state_dict().keys() == m.state_dict().keys()
    for key, value in m.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    saved = json.loads((tmp_path / "config.json").read_text())
    if head in ("classification", "tagging"):
        assert len(saved["id2label"]) == num_labels  # what num_labels is saved as
        assert (saved.get("problem_type") == "regression") == (num_labels == 1)
    inputs = inputs_for(head)
    expected_outputs(m, inputs)  # sets the classification labels
    with torch.no_grad():
        a, b = m(**inputs), loaded(**inputs)
    for key in a.keys():
        assert torch.equal(a[key], b[key]), key
    assert type(type(m).from_pretrained(tmp_path)) is type(m)  # a head class loads its own head


def test_a_head_class_takes_only_its_own_head(tmp_path):
    m = build("tagging", 4)
    m.save_pretrained(tmp_path)
    with pytest.raises(UserError, match="SGNetForSpanQA computes the span_qa head, not 'tagging'"):
        SGNetForSpanQA.from_pretrained(tmp_path)
    with pytest.raises(UserError, match="computes the tagging head, not 'span_qa'"):
        SGNetForTagging(m.base_model, SGNetConfig(head="span_qa"))
    with pytest.raises(UserError, match="pool 'option' reads the tokens of a multiple-choice option"):
        SGNetConfig(head="classification", pool="option")


def test_a_copy_keeps_its_head_class():
    m = build("multiple_choice", 1, "option")
    twin = copy.deepcopy(m)
    assert type(twin) is SGNetForMultipleChoice
    inputs = inputs_for("multiple_choice")
    with torch.no_grad():
        assert torch.equal(twin(**inputs).logits, m(**inputs).logits)
