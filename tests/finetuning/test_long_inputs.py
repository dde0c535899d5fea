"""--long-inputs through build_features: what each split gets, what is counted and reported."""
import argparse
import logging

import numpy as np
import pytest
from transformers import AutoTokenizer

from structattn.errors import UserError
from structattn.settings import default_encoder
from structattn.structure import ExpansionRules
from structattn.tasks.base import Example, TaskSpec
from structattn.run_config import RunConfig
from structattn.train.config import add_config_arguments, config_from_args
from structattn.structure.spec import StructureSpec
from structattn.train.features import aggregate_predictions, build_features

MAX = 32
NO_STRUCTURE = StructureSpec(relation=None, options={}, rules=ExpansionRules())


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(default_encoder())


def _spec(kind, labels):
    return TaskSpec(name="t", kind=kind, label_list=labels, splits={}, reader=None, metric_fn=None, main_metric="x")


def _words(n, offset=0):
    return [f"word{(i + offset) % 50}" for i in range(n)]  # 2-3 sub-words each


def _pairs():
    return [Example(["a", "question", "?"], _words(60), 1, "p:1"),
            Example(["short"], ["one"], 0, "p:2"),
            Example(_words(40), _words(40, 7), 1, "p:3")]


def _tagged():
    long = _words(80)
    return [Example(long, None, ["X" if i % 3 == 0 else "O" for i in range(80)], "t:1"),
            Example(["a", "b"], None, ["O", "X"], "t:2")]


def _build(task, examples, tok, **kwargs):
    return build_features(task, examples, tok, NO_STRUCTURE, max_length=MAX, stride=8, parser_name="unused",
                          label_to_id={"O": 0, "X": 1}, show_progress=False, **kwargs)


def test_default_truncates_pairs_and_reports_the_count(tok, caplog, capsys):
    task = _spec("classification", ("n", "y"))
    assert RunConfig().long_inputs == "truncate"
    with caplog.at_level(logging.INFO, logger="structattn.train.features"):
        feats = build_features(task, _pairs(), tok, NO_STRUCTURE, max_length=MAX, stride=8, parser_name="unused",
                               training=True, split="train", show_progress=True)
    assert [f["example_index"] for f in feats] == [0, 1, 2]  # one window per example
    assert all(len(f["input_ids"]) <= MAX for f in feats)
    message = "train: 2 of 3 examples longer than 32 tokens: truncated ("
    assert any(r.getMessage().startswith(message) for r in caplog.records)
    assert message in capsys.readouterr().err  # printed beside the progress bars


def test_windows_give_every_window_the_label_and_average_the_logits(tok, caplog):
    task = _spec("classification", ("n", "y"))
    with caplog.at_level(logging.INFO, logger="structattn.train.features"):
        feats = _build(task, _pairs(), tok, long_inputs="windows", training=True, split="train")
    per_example = np.bincount([f["example_index"] for f in feats])
    assert per_example[0] > 1 and per_example[1] == 1 and per_example[2] > 1
    assert all(f["labels"] == _pairs()[f["example_index"]].label for f in feats)
    windows = per_example[0] + per_example[2]
    message = f"train: 2 of 3 examples longer than 32 tokens: split into {windows} overlapping windows starting at " \
        "word starts; 1 example(s) lost "  # p:3, whose repeated segment does not fit beside the sliding one
    assert any(r.getMessage().startswith(message) for r in caplog.records)
    # one window votes 'y' strongly, the others mildly 'n': the mean decides
    logits = [np.array([1.0, 0.0]) for _ in feats]
    logits[0] = np.array([0.0, 10.0])
    assert aggregate_predictions(task, feats, logits, _pairs(), ("n", "y"))[0] == 1


def test_tagging_trains_on_truncated_examples_and_evaluates_every_word(tok, caplog):
    task = _spec("tagging", ("O", "X"))
    examples = _tagged()
    train = _build(task, examples, tok, training=True, split="train")
    assert [f["example_index"] for f in train] == [0, 1]
    labelled = [int(train[0]["token_word"][t]) for t, y in enumerate(train[0]["labels"]) if y != -100]
    assert labelled == list(range(len(labelled))) and len(labelled) < 80  # the words that fit, in order
    with pytest.raises(RuntimeError, match="got no prediction; build evaluation features"):
        aggregate_predictions(task, train, [np.zeros((len(f["input_ids"]), 2)) for f in train], examples, ("O", "X"))

    with caplog.at_level(logging.INFO, logger="structattn.train.features"):
        dev = _build(task, examples, tok, split="dev")  # evaluation: word-aligned windows
    assert sum(f["example_index"] == 0 for f in dev) > 1
    # logits that say each word's gold tag at its first sub-word: every word comes back
    logits = []
    for f in dev:
        out = np.zeros((len(f["input_ids"]), 2))
        for t, y in enumerate(f["labels"]):
            if y != -100:
                out[t, y] = 1.0
        logits.append(out)
    assert aggregate_predictions(task, dev, logits, examples, ("O", "X")) == [ex.label for ex in examples]
    message = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("dev: 1 of 2 examples"))
    assert "overlapping windows" in message and "--long-inputs truncate applies to training" in message


def test_bad_long_inputs_value_is_a_user_error_before_any_work(tok):
    with pytest.raises(UserError, match="long_inputs='slide' is not valid; choose truncate .* --long-inputs"):
        _build(_spec("classification", ("n", "y")), _pairs(), tok, long_inputs="slide")


def test_long_inputs_is_a_flag():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, RunConfig)
    assert config_from_args(parser.parse_args([]), RunConfig).long_inputs == "truncate"
    assert config_from_args(parser.parse_args(["--long-inputs", "windows"]), RunConfig).long_inputs == "windows"


def test_rte_train_count_on_the_real_data(tok, caplog):
    """The issue's figure: 304 of 2,490 RTE train pairs do not fit in 128 tokens (all-MiniLM-L6-v2)."""
    from structattn.settings import data_dir_candidate
    from structattn.tasks import get_task

    task = get_task("rte")
    path = data_dir_candidate() / task.splits["train"]
    if not path.exists():
        pytest.skip(f"data not found: {path} (set STRUCTATTN_DATA to the shared data folder)")
    with caplog.at_level(logging.INFO, logger="structattn.train.features"):
        feats = build_features(task, task.read("train"), tok, NO_STRUCTURE, max_length=128, stride=32,
                               parser_name="unused", training=True, split="train", show_progress=False)
    assert len(feats) == 2490
    message = "train: 304 of 2,490 examples longer than 128 tokens: truncated (9,054 sub-word tokens dropped)"
    assert message in [r.getMessage() for r in caplog.records]  # quoted in docs/sla.md
