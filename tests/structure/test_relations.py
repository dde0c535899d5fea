import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brute import bfs_distances, brute_ancestors, brute_sla
from strategies import random_trees
from structattn.dependency import Parse
from structattn.structure import relations as R


@settings(max_examples=200, deadline=None)
@given(random_trees())
def test_tree_distance_matches_bfs(heads):
    assert np.array_equal(R.tree_distances(np.array([heads]))[0], bfs_distances(heads))


@settings(max_examples=200, deadline=None)
@given(random_trees(), st.integers(0, 6))
def test_sla_mask_matches_brute_force(heads, m):
    assert np.array_equal(R.word_mask(heads, "sla", m=m), brute_sla(heads, m))


@settings(max_examples=200, deadline=None)
@given(random_trees())
def test_sdoi_is_true_ancestors(heads):
    assert np.array_equal(R.word_mask(heads, "sdoi"), brute_ancestors(heads))


@settings(max_examples=100, deadline=None)
@given(random_trees(), st.integers(0, 8))
def test_window_forward_backward(heads, k):
    n = len(heads)
    win = R.word_mask(heads, "window", k=k)
    fwd = R.word_mask(heads, "forward")
    bwd = R.word_mask(heads, "backward")
    for i in range(n):
        for j in range(n):
            assert win[i, j] == (abs(i - j) <= k)
            assert fwd[i, j] == (j >= i)
            assert bwd[i, j] == (j <= i)


def test_non_projective_tree():
    # 1 -> 3 crosses 2 -> 4: a non-projective tree; word 4's ancestors are 2 and root 1... check explicitly.
    heads = [0, 1, 1, 2]  # words: 1 root; 2,3 children of 1; 4 child of 2
    heads_np = [0, 4, 1, 1]  # 2's head is 4 (arc 4->2 crosses 1->3)
    for h in (heads, heads_np):
        assert np.array_equal(R.word_mask(h, "sdoi"), brute_ancestors(h))
    anc = R.word_mask(heads_np, "sdoi")
    assert anc[1].tolist() == [True, True, False, True]  # word 2 sees itself, 4 and 1


def test_sla_hand_worked():
    # "the cat sat on mats": the->cat, cat->sat, sat root, on->sat, mats->on
    heads = [2, 3, 0, 3, 4]
    dist = R.tree_distances(np.array([heads]))[0]
    assert dist[0].tolist() == [0, 1, 2, 3, 4]
    mask = R.word_mask(heads, "sla", m=1)
    # row 0 (the): neighbours {the, cat}; dist to sat via cat is 1 -> visible; 'on' via cat = 2 -> hidden
    assert mask[0].tolist() == [True, True, True, False, False]


def test_batch_word_masks_keeps_order_and_groups():
    rng = np.random.default_rng(0)
    parses = []
    for s in range(50):
        n = int(rng.integers(1, 12))
        heads = [0] + [int(rng.integers(1, i + 1)) for i in range(1, n)]
        parses.append(Parse(words=["w"] * n, heads=heads, deprels=["dep"] * n, upos=["X"] * n, sent_id=str(s)))
    masks = R.batch_word_masks(parses, "sla", m=2)
    for p, mask in zip(parses, masks):
        assert np.array_equal(mask, brute_sla(list(p.heads), 2))


def test_every_relation_has_true_diagonal():
    heads = [2, 0, 2, 3]
    for name in R.RELATIONS:
        mask = R.word_mask(heads, name, m=0, k=0)
        assert mask.diagonal().all(), name


def test_unknown_relation_lists_valid_names():
    with pytest.raises(ValueError, match="valid relations: .*sla"):
        R.get_relation("syntax")


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_threshold(bad):
    with pytest.raises(ValueError, match="non-negative integer"):
        R.word_mask([0], "sla", m=bad)


def test_single_word_sentence():
    for name in R.RELATIONS:
        assert R.word_mask([0], name).tolist() == [[True]]
