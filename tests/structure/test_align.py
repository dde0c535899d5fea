import warnings

import numpy as np
import pytest

from tokenizers_fixture import ALL
from structattn.errors import UserError
from structattn.structure import encode_words, first_subword_positions
from structattn.structure.align import repair_words, token_counts


@pytest.fixture(params=sorted(ALL))
def tok(request):
    return ALL[request.param]()


WORDS = ["Unbelievably", "good", "film", ",", "N.Y.", "do", "n't", "日本語", "😀", "!"]


def _words_of(tok, window):
    """Reconstruct per-word token lists from token_word."""
    out = {}
    for t, w in enumerate(window.token_word):
        if w >= 0:
            out.setdefault(int(w), []).append(window.input_ids[t])
    return out


def test_every_word_gets_its_own_tokens(tok):
    (win,) = encode_words(tok, WORDS)
    per_word = _words_of(tok, win)
    assert sorted(per_word) == list(range(len(WORDS)))
    # Special tokens are the only -1s and sit at the ends.
    assert win.token_word[0] == -1 and win.token_word[-1] == -1
    # The tokens of word i are exactly what the tokenizer gives for word i alone in context order.
    positions = [t for t, w in enumerate(win.token_word) if w >= 0]
    assert positions == list(range(1, len(win.token_word) - 1))
    assert list(win.token_word[1:-1]) == sorted(win.token_word[1:-1])


def test_pairs_number_second_segment_after_first(tok):
    a, b = ["the", "cat"], ["sat", "on", "mats"]
    (win,) = encode_words(tok, a, b)
    words = sorted(set(int(w) for w in win.token_word if w >= 0))
    assert words == [0, 1, 2, 3, 4]
    assert (win.token_word == -1).sum() >= 3


def test_long_input_is_windowed_without_loss(tok):
    words = [f"word{i % 7}" for i in range(300)]
    wins = encode_words(tok, words, max_length=64, stride=16, long_inputs="windows")
    assert len(wins) > 1
    covered = set()
    for w in wins:
        assert len(w.input_ids) <= 64
        assert w.token_word[0] == -1 and w.token_word[-1] == -1  # closing special token kept
        covered |= set(int(x) for x in w.token_word if x >= 0)
    assert covered == set(range(300))
    # consecutive windows overlap
    firsts = [min(x for x in w.token_word if x >= 0) for w in wins]
    lasts = [max(x for x in w.token_word if x >= 0) for w in wins]
    assert all(firsts[i + 1] <= lasts[i] for i in range(len(wins) - 1))


def test_long_pair_windows_the_longer_segment():
    tok = ALL["wordpiece"]()
    a = ["short", "question", "?"]
    b = [f"context{i}" for i in range(200)]
    wins = encode_words(tok, a, b, max_length=64, stride=16, long_inputs="windows")
    assert len(wins) > 1
    for w in wins:  # the question is in every window
        assert {0, 1, 2} <= set(int(x) for x in w.token_word)


def test_word_without_tokens_is_replaced_by_unknown():
    tok = ALL["wordpiece"]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (win,) = encode_words(tok, ["good", "\u200b", "film"])
    assert any("map to no sub-word token" in str(c.message) for c in caught)
    assert sorted(set(int(x) for x in win.token_word if x >= 0)) == [0, 1, 2]
    assert tok.unk_token_id in win.input_ids


def test_empty_segment_is_an_error():
    with pytest.raises(UserError, match="has no words"):
        encode_words(ALL["wordpiece"](), [])


def test_slow_tokenizer_refused():
    class Slow:
        is_fast = False
    with pytest.raises(UserError, match="not a fast tokenizer"):
        encode_words(Slow(), ["a"])


def test_first_subword_positions():
    tw = np.array([-1, 0, 0, 1, 2, 2, -1, -2])
    assert first_subword_positions(tw).tolist() == [False, True, False, True, True, False, False, False]


def test_stride_too_large_is_a_clear_error():
    with pytest.raises(UserError, match="stride=32 must be >= 0 and smaller than the 30"):
        encode_words(ALL["wordpiece"](), ["a", "b"], max_length=32, stride=32, long_inputs="windows")


@pytest.mark.parametrize("name", sorted(ALL))
def test_token_counts_equal_one_word_at_a_time(name):
    """The batched count against a plain one: each word tokenised alone, without special tokens."""
    tok = ALL[name]()
    lists = [["the", "unbelievably", "good", "film"], ["New", "York"], []]
    counts = token_counts(tok, lists)
    for words, got in zip(lists, counts):
        plain = [len(tok([w], is_split_into_words=True, add_special_tokens=False).input_ids) for w in words]
        assert got.tolist() == plain
    assert token_counts(tok, []) == []


def test_repair_words_replaces_only_the_empty_ones_and_recounts():
    tok = ALL["wordpiece"]()
    words = ["good", "\u200b", "film"]
    (counts,) = token_counts(tok, [words])
    assert counts.tolist()[1] == 0
    with pytest.warns(UserWarning, match=r"here: 1 word\(s\) map to no sub-word token"):
        fixed, fixed_counts = repair_words(tok, words, counts, "here")
    assert fixed == ["good", tok.unk_token, "film"] and fixed_counts.tolist() == [1, 1, 1]
    assert repair_words(tok, ["good"], token_counts(tok, [["good"]])[0], "here")[0] == ["good"]

    class NoUnknown:
        unk_token = None
    with pytest.raises(UserError, match="has no unknown token"):
        repair_words(NoUnknown(), words, counts, "here")
