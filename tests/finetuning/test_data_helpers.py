import numpy as np

from structattn.tasks.base import Example, TaskSpec
from structattn.finetuning.features import parent_targets
from structattn.train.features import aggregate_predictions


def _spec(kind, labels):
    return TaskSpec(name="t", kind=kind, label_list=labels, splits={}, reader=None, metric_fn=None, main_metric="x")


def test_parent_targets_point_at_first_subword_of_head():
    # words: 0 'a' (head 1), 1 'bb' root (two sub-words), 2 'c' (head 1)
    tw = np.array([-1, 0, 1, 1, 2, -1])
    parents = np.array([1, -1, 1])
    assert parent_targets(tw, parents) == [-100, 2, 2, -100, 2, -100]


def test_parent_outside_window_is_unsupervised():
    tw = np.array([-1, 5, 6, -1])
    parents = np.array([0, 0, 0, 0, 0, 9, 5])
    assert parent_targets(tw, parents) == [-100, -100, 1, -100]


def test_classification_windows_are_averaged():
    spec = _spec("classification", ("neg", "pos"))
    feats = [{"example_index": 0}, {"example_index": 0}, {"example_index": 1}]
    logits = [np.array([2.0, 0.0]), np.array([0.0, 3.0]), np.array([1.0, 0.0])]
    ex = [Example(["a"], None, 1, "x:1"), Example(["b"], None, 0, "x:2")]
    assert aggregate_predictions(spec, feats, logits, ex, ["neg", "pos"]) == [1, 0]


def test_tagging_uses_most_central_window():
    spec = _spec("tagging", ("O", "X"))
    ex = [Example(["w0", "w1", "w2"], None, ["O", "O", "O"], "x:1")]
    # window 1 sees words 0,1 (word 1 at the edge); window 2 sees words 1,2 with word 1 central
    f1 = {"example_index": 0, "token_word": np.array([-1, 0, 1, -1])}
    f2 = {"example_index": 0, "token_word": np.array([-1, 0, 1, 1, 2, -1])}
    l1 = np.array([[0, 0], [5, 0], [0, 5], [0, 0]], dtype=float)   # says word1 = X
    l2 = np.array([[0, 0], [5, 0], [5, 0], [0, 0], [0, 5], [0, 0]], dtype=float)  # word1 = O (central)
    f2["token_word"] = np.array([-1, 0, 1, 1, 2, -1])
    assert aggregate_predictions(spec, [f1, f2], [l1, l2], ex, ["O", "X"]) == [["O", "O", "X"]]
