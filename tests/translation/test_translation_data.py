"""Translation data helpers: piece-to-word alignment, token-count batches, collation, the schedule."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from structattn.structure.example import WordStructure
from structattn.translation.data import (SourceStructure, TranslationCollator, align_pieces_to_words,
                                         shuffled_token_batches, token_batches, word_char_spans)
from structattn.translation.trainer import warmup_inverse_sqrt


def test_word_spans_follow_the_text_left_to_right():
    text = "Don't stop (now)."
    words = ["Do", "n't", "stop", "(", "now", ")", "."]
    spans = word_char_spans(text, words)
    assert [text[s:e] for s, e in spans] == words


def test_a_changed_word_takes_the_next_characters():
    assert word_char_spans("a \x07b c", ["a", "\ufffdb", "c"]) == [(0, 1), (2, 4), (5, 6)]


def test_pieces_map_to_the_word_of_their_first_non_space_character():
    text = "A dog's bone."
    spans = word_char_spans(text, ["A", "dog", "'s", "bone", "."])
    # pieces as a Metaspace BPE gives them: "▁A", "▁do", "g", "'", "s", "▁", "bone", ".", "</s>"
    offsets = [(0, 1), (1, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 12), (12, 13), (0, 0)]
    special = [False] * 8 + [True]
    tw = align_pieces_to_words(offsets, text, spans, special)
    assert tw.tolist() == [0, 1, 1, 2, 2, 3, 3, 4, -1]  # the lone "▁" joins the next piece's word


def _brute_force_ok(batches, src, tgt, max_tokens):
    seen = sorted(i for b in batches for i in b)
    assert seen == list(range(len(src)))
    for b in batches:
        if len(b) > 1:
            assert len(b) * max(max(src[i], tgt[i]) for i in b) <= max_tokens


@pytest.mark.parametrize("batcher, seed", [(token_batches, None), (token_batches, 0), (token_batches, 7),
                                           (shuffled_token_batches, 0), (shuffled_token_batches, 7)])
def test_token_batches_cover_every_sentence_once_within_the_budget(batcher, seed):
    rng = np.random.default_rng(1)
    src = rng.integers(3, 40, size=200).tolist()
    tgt = [max(1, n + int(d)) for n, d in zip(src, rng.integers(-3, 4, size=200))]  # a translation's length follows
    batches = batcher(src, tgt, 256, seed)
    _brute_force_ok(batches, src, tgt, 256)
    assert batcher(src, tgt, 256, seed) == batches  # deterministic
    if batcher is shuffled_token_batches:  # not grouped by length: a smaller share of real tokens per batch
        assert _fill(batches, src, tgt) < 0.8 and _fill(token_batches(src, tgt, 256, seed), src, tgt) > 0.9


def _fill(batches, src, tgt) -> float:
    """Real (longer-side) tokens over padded tokens of ``batches``."""
    longest = [max(s, t) for s, t in zip(src, tgt)]
    return sum(longest[i] for b in batches for i in b) / sum(len(b) * max(longest[i] for i in b) for b in batches)


def test_an_over_long_sentence_gets_a_batch_of_its_own():
    batches = token_batches([5, 500, 6], [5, 7, 6], 64, None)
    assert [1] in batches and sorted(i for b in batches for i in b) == [0, 1, 2]


def test_collator_pads_and_builds_the_structure_mask():
    blocks = [np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=bool)]
    structure = SourceStructure(token_word=[np.array([0, 1, 1, 2, -1]), np.array([0, -1])],
                                structures=[WordStructure(blocks, [0]), WordStructure([np.ones((1, 1), bool)], [0])],
                                upos=[["DET", "NOUN", "PUNCT"], ["X"]])
    batch = TranslationCollator(pad_id=0)([[5, 6, 7, 8, 2], [9, 2]], [[4, 2], [4, 4, 2]], structure, [0, 1])
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 2], [9, 2, 0, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1] * 5, [1, 1, 0, 0, 0]]
    assert batch["labels"].tolist() == [[4, 2, -100], [4, 4, 2]]
    mask = batch["structure_mask"]
    assert mask.shape == (2, 5, 5) and mask.any(-1).all()  # no empty row
    assert not mask[0, 0, 3] and mask[0, 0, 1] and mask[0, 0, 2]  # word 0 does not see word 2; sees both pieces of 1
    assert mask[0, 4].all() and mask[0, :, 4].all()  # </s> is special: sees and is seen by all
    assert torch.equal(mask[1, 2:, 2:], torch.eye(3, dtype=torch.bool))


def test_warmup_then_inverse_square_root():
    assert warmup_inverse_sqrt(1, 100) == pytest.approx(0.01)
    assert warmup_inverse_sqrt(100, 100) == pytest.approx(1.0)
    assert warmup_inverse_sqrt(400, 100) == pytest.approx(0.5)
    assert warmup_inverse_sqrt(0, 100) == pytest.approx(0.01)
    assert max(warmup_inverse_sqrt(s, 100) for s in range(1, 1000)) == pytest.approx(1.0)
    assert math.isclose(warmup_inverse_sqrt(10_000, 100), 0.1)
