"""``pool="option"``: the multiple-choice head reads the mean of h̄ over the option's own tokens."""
from __future__ import annotations

import pytest
import torch
import transformers as T
from transformers import AutoTokenizer

from structattn.errors import UserError
from structattn.settings import default_encoder
from structattn.sgnet.model import SGNetConfig, SGNetModel
from structattn.tasks.multiple_choice import MCQuestion
from structattn.sgnet.multiple_choice_features import MultipleChoiceCollator, build_mc_features, question_option_span


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(default_encoder())


def test_question_option_span_marks_the_option_in_the_blank_or_after_the_question():
    words, first, stop = question_option_span("He went there because_.", "it rained hard")
    assert words == ["He", "went", "there", "because", "it", "rained", "hard", "."] and words[first:stop] == [
        "it", "rained", "hard"]
    words, first, stop = question_option_span("Who built it?", "The Romans")
    assert words[first:stop] == ["The", "Romans"] and stop == len(words)


def test_pool_mask_covers_exactly_the_option_tokens(tok):
    q = MCQuestion(qid="p:0", passage="Tom has an unbelievably red kite.", question="Tom's kite is _ .",
                   options=["red", "unbelievably green", "blue", "tokenization"], label=0, group="middle")
    (feat,) = build_mc_features([q], tok, max_length=64, show_progress=False)
    batch = MultipleChoiceCollator(tok.pad_token_id, option_mask=True)([feat, feat])
    mask = batch["pool_mask"]
    assert mask.shape == batch["input_ids"].shape and mask.dtype == torch.bool
    for c, option in enumerate(q.options):
        ids = batch["input_ids"][0, c][mask[0, c]].tolist()
        assert tok.decode(ids) == option.lower()  # the option's sub-words, all of them, nothing else
    assert "pool_mask" not in MultipleChoiceCollator(tok.pad_token_id)([feat])


def test_option_pooling_is_the_mean_over_the_masked_tokens():
    torch.manual_seed(0)
    encoder = T.BertModel(T.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, max_position_embeddings=64)).eval()
    m = SGNetModel(encoder, SGNetConfig(aggregation="none", head="multiple_choice", pool="option")).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (2, 3, 10), generator=g)
    pool = torch.zeros(2, 3, 10, dtype=torch.bool)
    pool[..., 6:8] = True
    with torch.no_grad():
        logits = m(input_ids=ids, pool_mask=pool).logits
        h = encoder(input_ids=ids.view(6, 10)).last_hidden_state
        expected = m.classifier(torch.tanh(encoder.pooler.dense(h[:, 6:8].mean(1)))).view(2, 3)
    torch.testing.assert_close(logits, expected)
    with pytest.raises(UserError, match="pool 'option' needs pool_mask"):
        m(input_ids=ids)


def test_option_pool_is_for_multiple_choice_only():
    with pytest.raises(UserError, match="pool 'option' reads the tokens of a multiple-choice option"):
        SGNetConfig(head="classification", pool="option")
    with pytest.raises(UserError, match="unknown pool 'last'; valid: first, mean, option"):
        SGNetConfig(head="multiple_choice", pool="last")
