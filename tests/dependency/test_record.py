"""Parse record and validate_tree: explicit cases and a brute-force check on random head arrays."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from structattn.dependency import Parse, ParseError, validate_tree


def brute_force_is_tree(heads: list[int]) -> bool:
    """A head array is one tree iff every head is in 0..n, exactly one word has head 0, no word is its
    own head, and walking up from every word reaches 0 within n steps."""
    n = len(heads)
    if n == 0 or any(not (0 <= h <= n) for h in heads):
        return False
    if sum(h == 0 for h in heads) != 1 or any(h == i + 1 for i, h in enumerate(heads)):
        return False
    for start in range(1, n + 1):
        node, steps = start, 0
        while node != 0 and steps <= n:
            node, steps = heads[node - 1], steps + 1
        if node != 0:
            return False
    return True


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=1, max_value=8).flatmap(
    lambda n: st.lists(st.integers(min_value=-1, max_value=n + 1), min_size=n, max_size=n)))
def test_validate_tree_matches_brute_force(heads):
    words = [f"w{i}" for i in range(len(heads))]
    try:
        validate_tree(words, heads, "s")
        valid = True
    except ParseError:
        valid = False
    assert valid == brute_force_is_tree(heads)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=12).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.integers(min_value=0, max_value=10 ** 6), min_size=n, max_size=n))))
def test_random_valid_trees_pass(data):
    n, draws = data
    # word k (k >= 2 in a random order) attaches to some earlier word of that order: always a tree
    order = sorted(range(1, n + 1), key=lambda k: draws[k - 1])
    heads = [0] * n
    for pos, k in enumerate(order[1:], start=1):
        heads[k - 1] = order[draws[k - 1] % pos]
    validate_tree([str(i) for i in range(n)], heads, "ok")


@pytest.mark.parametrize("heads, message", [
    ([2, 1, 0], "cycle"),
    ([0, 0, 1], "exactly one root"),
    ([2, 3, 1], "exactly one root"),
    ([0, 4, 1], "out of range"),
    ([0, -1, 1], "out of range"),
    ([0, 2, 1], "its own head"),
    ([0, 1], "3 words but 2 heads"),
])
def test_errors_name_the_sentence(heads, message):
    with pytest.raises(ParseError, match=message) as info:
        validate_tree(["a", "b", "c"], heads, "doc-7")
    assert "doc-7" in str(info.value)


@pytest.mark.parametrize("words", [[], ["a", ""], ["a", "  "], ["\t"]])
def test_empty_or_whitespace_words_rejected(words):
    with pytest.raises(ParseError):
        validate_tree(words, [0] + [1] * (len(words) - 1), "x")


def test_parse_round_trip_and_tuples():
    p = Parse(["I", "run"], [2, 0], ["nsubj", "root"], ["PRON", "VERB"], "s1")
    assert isinstance(p.words, tuple) and isinstance(p.heads, tuple)
    assert Parse.from_dict(p.to_dict()) == p
    assert len(p) == 2 and p.validate() is p
