"""Long inputs: truncation (the default) and word-aligned windows, checked against the tokenizer itself.

The oracle is the tokenizer's own un-truncated encoding of the words (``word_ids()`` with no
special tokens); nothing from structattn is used to compute the expected values.
"""
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenizers_fixture import ALL
from structattn.structure import encode_words, first_subword_positions
from structattn.structure.align import word_windows


@pytest.fixture(params=sorted(ALL))
def tok(request):
    return ALL[request.param]()


def _random_words(n, seed):
    """Distinct made-up words: every tokenizer splits most of them into several sub-words."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, int(rng.integers(2, 10)))) + str(i) for i in range(n)]


def _oracle(tok, words):
    """(sub-word ids, word id per sub-word) of the whole, un-truncated segment."""
    enc = tok(words, is_split_into_words=True, add_special_tokens=False)
    return list(enc["input_ids"]), enc.word_ids()


def _content(win):
    """Positions of the window's word tokens (everything but special tokens)."""
    return [t for t, w in enumerate(win.token_word) if w >= 0]


def _word_aligned_offset(ids, wids, got_ids, got_words):
    """Brute force: an offset i where the window's tokens are ids[i:i+L], i is a word start and the
    window's word indices are the oracle's; None if there is none."""
    L = len(got_ids)
    for i in range(len(ids) - L + 1):
        if ids[i:i + L] == got_ids and (i == 0 or wids[i] != wids[i - 1]) and wids[i:i + L] == got_words:
            return i
    return None


def test_default_is_truncate(tok):
    assert inspect.signature(encode_words).parameters["long_inputs"].default == "truncate"
    words = _random_words(200, seed=0)
    ids, _ = _oracle(tok, words)
    (win,) = encode_words(tok, words, max_length=40)
    assert len(win.input_ids) == 40
    content = _content(win)
    assert [win.input_ids[t] for t in content] == ids[:len(content)]  # a single segment loses its end
    assert win.example_length == len(ids) + (40 - len(content))
    assert win.dropped_tokens == len(ids) - len(content)


def test_long_pair_is_truncated_longest_first_with_right_token_word(tok):
    a, b = ["is", "it", "long", "?"], _random_words(120, seed=1)
    ids_a, _ = _oracle(tok, a)
    ids_b, wids_b = _oracle(tok, b)
    cut_inside_a_word = 0
    for max_length in range(24, 48):
        (win,) = encode_words(tok, a, b, max_length=max_length)
        assert len(win.input_ids) == max_length
        seg_a = [t for t in _content(win) if win.token_word[t] < len(a)]
        seg_b = [t for t in _content(win) if win.token_word[t] >= len(a)]
        # longest first: the shorter segment is whole, or both were cut to (nearly) equal lengths
        assert len(seg_a) == len(ids_a) or abs(len(seg_a) - len(seg_b)) <= 1
        assert [win.input_ids[t] for t in seg_a] == ids_a[:len(seg_a)]
        kept = len(seg_b)
        assert [win.input_ids[t] for t in seg_b] == ids_b[:kept]  # the long one lost its end
        assert [int(win.token_word[t]) - len(a) for t in seg_b] == wids_b[:kept]
        assert win.dropped_tokens == len(ids_a) - len(seg_a) + len(ids_b) - kept
        cut_inside_a_word += wids_b[kept] == wids_b[kept - 1]
    assert cut_inside_a_word, "no case cut a word: the token_word check of a cut word did not run"


def test_pair_of_two_long_segments_loses_tokens_from_both(tok):
    a, b = _random_words(60, seed=2), _random_words(90, seed=3)
    ids_a, wids_a = _oracle(tok, a)
    ids_b, _ = _oracle(tok, b)
    (win,) = encode_words(tok, a, b, max_length=48)
    seg_a = [t for t in _content(win) if win.token_word[t] < len(a)]
    seg_b = [t for t in _content(win) if win.token_word[t] >= len(a)]
    assert abs(len(seg_a) - len(seg_b)) <= 1  # longest first: both end up (nearly) equal
    assert [win.input_ids[t] for t in seg_a] == ids_a[:len(seg_a)]
    assert [int(win.token_word[t]) for t in seg_a] == wids_a[:len(seg_a)]
    assert [win.input_ids[t] for t in seg_b] == ids_b[:len(seg_b)]


@pytest.mark.parametrize("max_length,stride", [(24, 6), (40, 0), (40, 15), (64, 31)])
def test_windows_start_at_word_starts_brute_force(tok, max_length, stride):
    words = _random_words(150, seed=4)
    ids, wids = _oracle(tok, words)
    assert len(ids) > len(words)  # multi-piece words, so a window could start inside one
    wins = encode_words(tok, words, max_length=max_length, stride=stride, long_inputs="windows")
    assert len(wins) > 2
    covered, previous = set(), None
    for win in wins:
        assert len(win.input_ids) <= max_length
        content = _content(win)
        assert content == list(range(content[0], content[-1] + 1))
        got_ids = [win.input_ids[t] for t in content]
        got_words = [int(win.token_word[t]) for t in content]
        start = _word_aligned_offset(ids, wids, got_ids, got_words)
        assert start is not None, "a window does not start at a word start (or maps tokens to wrong words)"
        oracle_first = [j == 0 or wids[start + j] != wids[start + j - 1] for j in range(len(content))]
        assert first_subword_positions(win.token_word)[content].tolist() == oracle_first
        span = range(start, start + len(content))
        if previous is not None:
            assert span.start > previous.start
            assert len(set(span) & set(previous)) <= stride  # overlap in tokens, whole words only
            assert span.start <= previous.stop  # no gap
        covered |= {wids[i] for i in span}
        previous = span
    assert covered == set(range(len(words)))  # windows mode still covers every word
    assert wins[0].dropped_tokens == 0 and wins[0].example_length > max_length


def test_word_longer_than_a_window_gets_a_window_of_its_own(tok):
    long_word = "qwertyuiopasdfghjklzxcvbnmqwertyuiopasdfghjkl"
    words = ["the", "cat", long_word, "sat", "on", "the", "mat"]
    ids, wids = _oracle(tok, words)
    pieces = [ids[i] for i in range(len(ids)) if wids[i] == 2]
    max_length = 10
    room = max_length - tok.num_special_tokens_to_add(pair=False)
    assert len(pieces) > room, "precondition: the word must not fit in a window"
    wins = encode_words(tok, words, max_length=max_length, stride=2, long_inputs="windows")
    holding = [w for w in wins if 2 in w.token_word.tolist()]
    assert len(holding) == 1  # its own window, and only that one
    (own,) = holding
    assert [int(own.token_word[t]) for t in _content(own)] == [2] * room
    assert [own.input_ids[t] for t in _content(own)] == pieces[:room]  # its first sub-words
    assert {int(x) for w in wins for x in w.token_word if x >= 0} == set(range(len(words)))
    assert all(w.dropped_tokens == len(pieces) - room for w in wins)


def test_pair_windows_keep_the_short_segment_whole_and_cut_only_the_long_word():
    tok = ALL["byte_bpe"]()
    a = ["short", "question", "?"]
    b = ["the", "cat", "qwertyuiopasdfghjklzxcvbnm", "sat"]
    wins = encode_words(tok, a, b, max_length=40, stride=2, long_inputs="windows")
    ids_a, _ = _oracle(tok, a)
    for w in wins:
        assert len(w.input_ids) <= 40
        assert [w.input_ids[t] for t in _content(w) if w.token_word[t] < 3] == ids_a
    assert {int(x) for w in wins for x in w.token_word if x >= 0} == set(range(7))
    (own,) = [w for w in wins if 5 in w.token_word.tolist()]
    assert {int(x) for x in own.token_word if x >= 3} == {5}  # the long word alone beside the question


def test_pair_windows_with_two_long_segments_cut_the_repeated_one(tok):
    a, b = _random_words(50, seed=5), _random_words(90, seed=6)
    ids_a, _ = _oracle(tok, a)
    ids_b, wids_b = _oracle(tok, b)
    room = 40 - tok.num_special_tokens_to_add(pair=True)
    assert len(ids_a) > room, "precondition: the shorter segment alone does not fit"
    wins = encode_words(tok, a, b, max_length=40, stride=6, long_inputs="windows")
    covered = set()
    for w in wins:
        assert len(w.input_ids) <= 40
        seg_a = [w.input_ids[t] for t in _content(w) if w.token_word[t] < len(a)]
        assert room // 2 <= len(seg_a) < len(ids_a) and seg_a == ids_a[:len(seg_a)]  # its start, cut to fit
        seg_b = [t for t in _content(w) if w.token_word[t] >= len(a)]
        got = [int(w.token_word[t]) - len(a) for t in seg_b]
        assert _word_aligned_offset(ids_b, wids_b, [w.input_ids[t] for t in seg_b], got) is not None
        covered |= set(got)
    assert covered == set(range(len(b)))  # the sliding segment is covered word by word
    assert wins[0].dropped_tokens == len(ids_a) - max(
        sum(1 for t in _content(w) if w.token_word[t] < len(a)) for w in wins)


def test_bad_long_inputs_value_is_a_clear_error():
    from structattn.errors import UserError

    with pytest.raises(UserError, match="long_inputs='slide' is not valid; choose truncate"):
        encode_words(ALL["wordpiece"](), ["a"], long_inputs="slide")


def test_word_windows_small_cases():
    assert word_windows(np.array([1] * 6), room=3, stride=1) == [(0, 3), (2, 5), (4, 6)]
    assert word_windows(np.array([1] * 6), room=3, stride=0) == [(0, 3), (3, 6)]
    # a 2-piece word does not fit in a stride of 1: no overlap rather than half a word
    assert word_windows(np.array([1, 1, 2, 1, 1]), room=4, stride=1) == [(0, 3), (3, 5)]
    # a word longer than the room: a window of its own, neighbours unaffected
    assert word_windows(np.array([1, 5, 1, 1]), room=3, stride=2) == [(0, 1), (1, 2), (2, 4)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=40), st.integers(1, 12), st.integers(0, 11))
def test_word_windows_properties(counts, room, stride):
    stride = min(stride, room - 1)
    ranges = word_windows(np.array(counts), room, stride)
    size = [sum(counts[s:e]) for s, e in ranges]
    assert ranges[0][0] == 0 and ranges[-1][1] == len(counts)
    for (s, e), n in zip(ranges, size):
        assert s < e and (n <= room or e - s == 1)
    for (s0, e0), (s1, e1) in zip(ranges, ranges[1:]):
        assert s0 < s1 <= e0 < e1  # progress, no gap, each window adds a word
        assert sum(counts[s1:e0]) <= stride
        # the overlap is maximal: one more whole word would break the stride, the room or progress
        if s1 - 1 > s0:
            assert sum(counts[s1 - 1:e0]) > stride or sum(counts[s1 - 1:e0 + 1]) > room
