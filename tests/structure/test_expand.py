import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brute import brute_ancestors, brute_sla
from strategies import random_trees
from structattn.dependency import Parse
from structattn.structure import ExpansionRules, build_word_structures, example_word_mask, expand_to_tokens

# token_word's documented codes (structattn.structure.expand), spelled out so the oracle stays independent
SPECIAL, PAD = -1, -2


def _parse(heads, upos=None, sid="s"):
    n = len(heads)
    return Parse(words=[f"w{i}" for i in range(n)], heads=heads, deprels=["dep"] * n,
                 upos=upos or ["X"] * n, sent_id=sid)


@st.composite
def examples(draw):
    """A random example: 1-2 segments of 1-3 sentences, random sub-word split, random padding."""
    n_seg = draw(st.integers(1, 2))
    segs = [[_parse(draw(random_trees(max_size=8))) for _ in range(draw(st.integers(1, 3)))] for _ in range(n_seg)]
    n_words = [sum(len(p) for p in seg) for seg in segs]
    token_word = [SPECIAL]
    offset = 0
    for s, n in enumerate(n_words):
        for w in range(n):
            token_word += [offset + w] * draw(st.integers(1, 3))
        token_word.append(SPECIAL)
        offset += n
    token_word += [PAD] * draw(st.integers(0, 3))
    rules = ExpansionRules(special_rows=draw(st.sampled_from(["all", "self"])),
                           special_cols=draw(st.sampled_from(["visible", "hidden"])),
                           cross_segment=draw(st.sampled_from(["all", "none"])),
                           cross_sentence=draw(st.sampled_from(["none", "all"])))
    relation = draw(st.sampled_from(["sla", "window", "sdoi", "forward", "backward"]))
    return segs, np.array(token_word), rules, relation


def brute_word_mask(heads, relation, m=2, k=2):
    """One sentence's word relation by definition (BFS distances, ancestor walks, explicit loops)."""
    if relation == "sla":
        return brute_sla(heads, m)
    if relation == "sdoi":
        return brute_ancestors(heads)
    rule = {"window": lambda i, j: abs(i - j) <= k, "forward": lambda i, j: j >= i,
            "backward": lambda i, j: j <= i}[relation]
    n = len(heads)
    return np.array([[rule(i, j) for j in range(n)] for i in range(n)], dtype=bool).reshape(n, n)


def brute_token_mask(segs, token_word, rules, relation):
    # word -> (segment, sentence, local index) and per-sentence masks
    owner, blocks = [], []
    for s, seg in enumerate(segs):
        for p in seg:
            blocks.append(brute_word_mask(list(p.heads), relation))
            for i in range(len(p)):
                owner.append((s, len(blocks) - 1, i))
    T = len(token_word)
    real = [w != PAD for w in token_word]
    out = np.zeros((T, T), dtype=bool)
    for t in range(T):
        for u in range(T):
            a, b = token_word[t], token_word[u]
            if a == PAD:
                out[t, u] = real[u]
            elif b == PAD:
                out[t, u] = False
            elif t == u:
                out[t, u] = True
            elif a == SPECIAL:
                out[t, u] = rules.special_rows == "all" or (b == SPECIAL and rules.special_cols == "visible")
            elif b == SPECIAL:
                out[t, u] = rules.special_cols == "visible"
            else:
                (sa, ka, ia), (sb, kb, ib) = owner[a], owner[b]
                if ka == kb:
                    out[t, u] = blocks[ka][ia, ib]
                elif sa != sb:
                    out[t, u] = rules.cross_segment == "all"
                else:
                    out[t, u] = rules.cross_sentence == "all"
    return out


@settings(max_examples=150, deadline=None)
@given(examples())
def test_expansion_matches_brute_force(ex):
    segs, token_word, rules, relation = ex
    structs = build_word_structures([segs[0]], [segs[1]] if len(segs) > 1 else None, relation, m=2, k=2)
    mask = expand_to_tokens(example_word_mask(structs[0], rules), token_word, rules)
    assert np.array_equal(mask, brute_token_mask(segs, token_word, rules, relation))
    assert mask.any(axis=1).all(), "a row is all False"


def test_subwords_share_row_and_column():
    p = _parse([2, 0, 2])
    ws = build_word_structures([[p]], None, "sla", m=0)[0]
    tw = np.array([SPECIAL, 0, 0, 1, 2, 2, 2, SPECIAL])
    mask = expand_to_tokens(example_word_mask(ws, ExpansionRules()), tw, ExpansionRules())
    for t in range(len(tw)):
        for u in range(len(tw)):
            if tw[t] >= 0 and tw[u] >= 0 and tw[t] == tw[u]:
                assert mask[t, u]
    assert np.array_equal(mask[1], mask[2]) and np.array_equal(mask[:, 4], mask[:, 6])


def test_punct_visible_option():
    p = _parse([2, 0, 2, 3, 4, 5], upos=["X", "X", "X", "X", "X", "PUNCT"])
    ws = build_word_structures([[p]], None, "sla", m=0)[0]
    off = example_word_mask(ws, ExpansionRules())
    on = example_word_mask(ws, ExpansionRules(punct_visible=True))
    assert not off[0, 5] and on[:, 5].all()


def test_sdoi_defaults_are_sgnet_rules():
    rules = ExpansionRules.for_relation("sdoi")
    assert (rules.special_rows, rules.special_cols, rules.cross_segment) == ("self", "hidden", "none")
    assert ExpansionRules.for_relation("sla").special_rows == "all"
    assert ExpansionRules.for_relation("sdoi", cross_segment="all").cross_segment == "all"


def test_bad_rule_value():
    with pytest.raises(ValueError, match="special_rows='none' is not valid"):
        ExpansionRules(special_rows="none")


def test_all_padding_row_is_not_empty():
    p = _parse([0])
    ws = build_word_structures([[p]], None, "sla", m=1)[0]
    mask = expand_to_tokens(example_word_mask(ws, ExpansionRules()), np.array([PAD, PAD]), ExpansionRules())
    assert mask.all()
