"""``train-parsing`` reads and checks every treebank file (``--test`` too) before it trains or writes anything,
and every tree error names its file and line."""
from __future__ import annotations

import pytest

TREE = "(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))\n"


@pytest.fixture
def files(tmp_path):
    def put(**texts: str) -> list[str]:
        argv = []
        for split, text in texts.items():
            path = tmp_path / f"{split}.mrg"
            path.write_text(text, encoding="utf-8")
            argv += [f"--{split}", str(path)]
        return argv + ["--output-dir", str(tmp_path / "run"), "--model", "none", "--no-progress"]
    return put


def _refused(cli, argv, tmp_path, message: str) -> None:
    code, _, err = cli(["train-parsing", *argv])
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "run").exists()  # refused before the run folder, a model or spaCy


def test_an_unbalanced_test_file_is_found_before_training(cli, files, tmp_path):
    _refused(cli, files(train=TREE * 2, dev=TREE, test=TREE + "(S (NP (DT A) (NN dog))\n"), tmp_path,
             f"{tmp_path / 'test.mrg'}:2: '(' never closed")


def test_a_tree_longer_than_max_words_names_file_and_line(cli, files, tmp_path):
    long_tree = "(S " + " ".join(["(NN w)"] * 6) + ")\n"
    _refused(cli, [*files(train=TREE + TREE + long_tree, dev=TREE), "--max-words", "5"], tmp_path,
             f"{tmp_path / 'train.mrg'}:3: 6 words, more than the parser's max_words=5")
    _refused(cli, [*files(train=TREE, dev=long_tree), "--max-words", "5"], tmp_path,
             f"{tmp_path / 'dev.mrg'}:1: 6 words")


@pytest.mark.parametrize("trees", ["(NN cat)\n(NN dog)\n", "(TOP (NN dog))\n(TOP (NN cat))\n",
                                   "(TOP (NN dog) (NN cat))\n"])
def test_training_trees_without_a_labelled_constituent_name_the_file(cli, files, tmp_path, trees):
    """Bare words and TOP over words alike: EVALB deletes TOP, so a parser trained on them scores nothing."""
    _refused(cli, files(train=trees, dev=TREE), tmp_path,
             f"{tmp_path / 'train.mrg'}: the training trees have no labelled constituent besides TOP")


def test_a_control_character_in_a_tree_names_file_and_line(cli, files, tmp_path):
    _refused(cli, files(train=TREE + "(S (NN c\x00t))\n", dev=TREE), tmp_path,
             f"{tmp_path / 'train.mrg'}:2: control character U+0000 (NUL)")
