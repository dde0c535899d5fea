"""Probing tasks: label rules on hand-built UD sentences, tree depth against brute force, the real task sizes."""
from __future__ import annotations

import random

import numpy as np
import pytest
from tasks_testutil import needs

from structattn.tasks.probing import (Sentence, bigram_shift, build_task, coordination_split, depth_label,
                                      invert_coordination, length_label, number_label, read_ud, tense_label,
                                      top_sequence, tree_depth)


def _sentence(rows: str) -> Sentence:
    """rows: 'form head deprel upos feats space' per line (feats 'k=v|k=v' or '_', space 1/0)."""
    words, heads, rels, upos, feats, spaces = [], [], [], [], [], []
    for line in rows.strip().splitlines():
        form, head, rel, pos, fs, sp = line.split()
        words.append(form)
        heads.append(int(head))
        rels.append(rel)
        upos.append(pos)
        feats.append({} if fs == "_" else dict(kv.split("=") for kv in fs.split("|")))
        spaces.append(sp == "1")
    return Sentence(words, heads, rels, upos, feats, spaces)


# "The dogs ran home and the cat slept ."
COORD = _sentence("""
The 2 det DET _ 1
dogs 3 nsubj NOUN Number=Plur 1
ran 0 root VERB Tense=Past 1
home 3 advmod ADV _ 1
and 8 cc CCONJ _ 1
the 7 det DET _ 1
cat 8 nsubj NOUN Number=Sing 1
slept 3 conj VERB Tense=Past 0
. 3 punct PUNCT _ 0
""")


def test_surface_text_and_labels():
    assert COORD.text() == "The dogs ran home and the cat slept."
    assert length_label(COORD) == "9-12"
    assert tense_label(COORD) == "Past"
    assert number_label(COORD, ("nsubj",)) == "Plur"
    assert number_label(COORD, ("obj",)) is None
    assert top_sequence(COORD) == "nsubj ROOT advmod conj punct"


def test_coordination_inversion_moves_clauses_with_their_spacing_and_case():
    cc, end = coordination_split(COORD)
    assert (cc, end) == (4, 7)
    assert invert_coordination(COORD, cc, end) == "The cat slept and the dogs ran home."


def test_tense_from_an_auxiliary_when_the_root_has_none():
    s = _sentence("""
She 3 nsubj PRON Number=Sing 1
has 3 aux AUX Tense=Pres 1
eaten 0 root VERB VerbForm=Part 0
. 3 punct PUNCT _ 0
""")
    assert tense_label(s) == "Pres"


def _brute_depth(heads):
    best = 0
    for i in range(len(heads)):
        steps, j = 1, i
        while heads[j] != 0:
            j = heads[j] - 1
            steps += 1
        best = max(best, steps)
    return best


def test_tree_depth_against_brute_force():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 25)
        heads = [0] + [rng.randint(1, i) for i in range(1, n)]  # each word's head is an earlier word: a tree
        perm = list(range(n))
        rng.shuffle(perm)  # relabel positions so the root is anywhere
        inv = {old: new for new, old in enumerate(perm)}
        relabelled = [0] * n
        for old in range(n):
            relabelled[inv[old]] = 0 if heads[old] == 0 else inv[heads[old] - 1] + 1
        assert tree_depth(relabelled) == _brute_depth(relabelled)
    assert depth_label(COORD) == "4" and tree_depth([0]) == 1  # the -> cat -> slept -> ran


def test_bigram_shift_swaps_two_adjacent_words_and_never_punctuation():
    rng = random.Random(3)
    original = COORD.text().rstrip(".").split()
    for _ in range(20):
        words = bigram_shift(COORD, rng).rstrip(".").split()
        changed = [i for i, (a, b) in enumerate(zip(words, original)) if a != b]
        assert len(changed) == 2 and changed[1] == changed[0] + 1
        assert words[changed[0]] == original[changed[1]] and words[changed[1]] == original[changed[0]]


@needs("ud_english_ewt/en_ewt-ud-train.conllu")
@pytest.mark.slow
def test_real_tasks_are_balanced_enough_and_deterministic():
    splits = {s: read_ud(s) for s in ("train", "dev", "test")}
    for name in ("BShif", "CoIn", "WC"):
        task = build_task(name, splits)
        again = build_task(name, splits)
        assert task.texts == again.texts and task.labels == again.labels
        assert min(len(task.texts[s]) for s in ("train", "dev", "test")) >= 100
        counts = np.unique(task.labels["train"], return_counts=True)[1]
        assert counts.max() / counts.sum() < 0.55 if name != "WC" else len(counts) == 30
        assert all(d.get("length outside 5-30 words", 0) > 0 for d in task.dropped.values())
