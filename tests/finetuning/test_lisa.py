"""LISA supervision: the recomputed logits are the supervised head's real attention logits."""
import math

import pytest
import torch
import torch.nn.functional as F

from structattn.errors import UserError
from structattn.finetuning.lisa import LisaSupervision


@pytest.fixture(scope="module")
def tiny_bert():
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=32, attn_implementation="eager")
    return BertModel(cfg).eval()


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (2, 7), generator=g)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0  # padding
    targets = torch.randint(0, 5, (2, 7), generator=g)
    targets[:, 0] = -100  # e.g. [CLS]
    targets[1, 5:] = -100
    return ids, mask, targets


def test_loss_and_hits_agree_with_the_heads_real_attention(tiny_bert):
    ids, mask, targets = _batch()
    lisa = LisaSupervision(tiny_bert)
    with torch.no_grad(), lisa.capture(targets, mask, count_hits=True):
        out = tiny_bert(input_ids=ids, attention_mask=mask, output_attentions=True)
    losses, hits, total = [], 0, 0
    valid = targets != -100
    for probs in out.attentions:  # [b, heads, T, T], softmax over keys with padding masked
        p = probs[:, -1]  # the last head is the supervised one
        losses.append(F.nll_loss(p.clamp_min(1e-30).log().flatten(0, 1), targets.flatten(), ignore_index=-100))
        hits += int(((p.argmax(-1) == targets) & valid).sum())
        total += int(valid.sum())
    assert lisa.loss().item() == pytest.approx(torch.stack(losses).mean().item(), rel=1e-5)
    assert lisa.parent_accuracy() == pytest.approx(hits / total)
    assert lisa.parent_accuracy() is None  # reading resets the count


def test_nothing_is_recorded_outside_capture_and_hits_only_when_asked(tiny_bert):
    ids, mask, targets = _batch()
    lisa = LisaSupervision(tiny_bert)
    with torch.no_grad():
        tiny_bert(input_ids=ids, attention_mask=mask)
    with pytest.raises(RuntimeError, match="lisa.capture"):
        lisa.loss()
    with torch.no_grad(), lisa.capture(targets, mask):
        tiny_bert(input_ids=ids, attention_mask=mask)
    assert math.isfinite(lisa.loss().item())
    assert lisa.parent_accuracy() is None


def test_the_loss_trains_the_supervised_heads_query_and_key_only(tiny_bert):
    ids, mask, targets = _batch()
    lisa = LisaSupervision(tiny_bert)
    tiny_bert.zero_grad()
    with lisa.capture(targets, mask):
        tiny_bert(input_ids=ids, attention_mask=mask)
    lisa.loss().backward()
    # in the last layer nothing downstream is supervised, so only the last head's rows may get a gradient
    q = tiny_bert.encoder.layer[-1].attention.self.query.weight.grad  # [hidden, hidden], rows = heads x 4
    assert q[12:].abs().sum() > 0 and q[:12].abs().sum() == 0
    tiny_bert.zero_grad()


def test_a_model_without_query_key_projections_is_refused():
    with pytest.raises(UserError, match="query/key"):
        LisaSupervision(torch.nn.Linear(3, 3))
