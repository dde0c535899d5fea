"""Paths are checked before any model loads or any work starts, with one line: a missing folder, a folder where a
file is expected, a file where a folder is expected. The model given here is an empty folder, which every loader
refuses: an error about the path shows that the path was checked first."""
from __future__ import annotations

import pytest


@pytest.fixture
def empty_model(tmp_path):
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    return str(folder)


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("The cat sat .\n", encoding="utf-8")
    return str(path)


def _one_line(code: int, err: str, *parts: str) -> None:
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(p in err for p in parts), err


@pytest.mark.parametrize("command", ["parse", "translate"])
def test_output_in_a_missing_folder_or_a_folder_is_refused_before_the_model_loads(cli, command, empty_model,
                                                                                  text_file, tmp_path):
    missing = str(tmp_path / "nodir" / "out.txt")
    _one_line(*cli([command, "--model", empty_model, "--input", text_file, "--output", missing])[::2],
              f"--output {missing}: the folder", "does not exist")
    _one_line(*cli([command, "--model", empty_model, "--input", text_file, "--output", str(tmp_path)])[::2],
              "is a folder; give a file name")
    _one_line(*cli([command, "--model", empty_model, "--input", str(tmp_path / "none.txt")])[::2],
              "--input: input file", "does not exist")
    _one_line(*cli([command, "--model", empty_model, "--input", str(tmp_path)])[::2], "is a folder, not a file")


def test_predict_probe_evaluate_check_paths_first(cli, empty_model, tmp_path):
    missing = str(tmp_path / "nodir" / "pred.json")
    _one_line(*cli(["predict", "--model", empty_model, "--output", missing])[::2], f"--output {missing}")
    _one_line(*cli(["predict", "--model", empty_model, "--input", str(tmp_path)])[::2], "--input: input",
              "is a folder")
    _one_line(*cli(["probe", "--model", empty_model, "--output", missing])[::2], f"--output {missing}")
    _one_line(*cli(["evaluate", "--model", str(tmp_path / "nope")])[::2], "--model", "no such folder")
    _one_line(*cli(["evaluate"])[::2], "give the model folder: --model DIR")


@pytest.mark.parametrize("argv", [
    ["score", "race", "--predictions", "{folder}"],
    ["score", "mctest", "--predictions", "{folder}"],
    ["score", "squad", "--gold", "{file}", "--predictions", "{folder}"],
    ["score", "evalb", "--gold", "{file}", "--predictions", "{folder}"],
])
def test_a_folder_given_as_a_predictions_file_is_called_a_folder(cli, argv, tmp_path, text_file):
    argv = [a.format(folder=tmp_path, file=text_file) for a in argv]
    _one_line(*cli(argv)[::2], str(tmp_path), "is a folder, not a file")


def test_score_output_folder_checked_before_scoring(cli, tmp_path, text_file):
    missing = str(tmp_path / "nodir" / "eval.json")
    _one_line(*cli(["score", "race", "--predictions", text_file, "--output", missing])[::2], f"--output {missing}")


def test_score_bleu_names_the_line_of_bad_bytes_and_control_characters(cli, tmp_path, text_file):
    hyp = tmp_path / "hyp.de"
    hyp.write_bytes(b"Ein Hund.\nZwei caf\xe9s.\n")
    _one_line(*cli(["score", "bleu", "--gold", text_file, "--predictions", str(hyp)])[::2],
              f"{hyp}:2: not valid UTF-8")
    hyp.write_bytes(b"Ein Hund.\n\x00\x00\x00\n")
    _one_line(*cli(["score", "bleu", "--gold", text_file, "--predictions", str(hyp)])[::2],
              f"{hyp}:2: control character U+0000 (NUL)")


@pytest.mark.parametrize("command", ["train", "train-parsing", "train-translation", "demo"])
def test_an_output_dir_that_is_a_file_is_refused_before_anything_loads(cli, command, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("keep me")
    _one_line(*cli([command, "--output-dir", str(blocker)])[::2], f"--output-dir {blocker}: is a file")
    _one_line(*cli([command, "--output-dir", str(blocker / "run")])[::2], "is a file, not a folder")
    assert blocker.read_text() == "keep me"


def test_train_translation_checks_its_own_parallel_files(cli, tmp_path):
    _one_line(*cli(["train-translation", "--output-dir", str(tmp_path / "run"), "--train-source",
                    str(tmp_path / "missing.en")])[::2], "--train-source: input file", "does not exist")
    assert not (tmp_path / "run").exists()
