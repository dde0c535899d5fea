"""The data folder: $STRUCTATTN_DATA, else ../shared/data from the working directory, else a clear error."""
from __future__ import annotations

import pytest

from structattn import settings
from structattn.cli import main
from structattn.errors import UserError


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory with no ../shared/data, and no STRUCTATTN_DATA."""
    cwd = tmp_path / "somewhere" / "cwd"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("STRUCTATTN_DATA", raising=False)
    return cwd


def test_no_env_and_no_folder_beside_the_working_directory_is_a_clear_error(elsewhere):
    with pytest.raises(UserError) as info:
        settings.data_dir()
    message = str(info.value)
    assert "STRUCTATTN_DATA is not set" in message
    assert str(elsewhere.parent / "shared" / "data") in message  # where it looked
    assert "set STRUCTATTN_DATA=" in message


def test_working_directory_relative_folder_is_found(elsewhere):
    data = elsewhere.parent / "shared" / "data"
    data.mkdir(parents=True)
    assert settings.data_dir() == data


def test_env_var_wins_over_the_working_directory(elsewhere, tmp_path, monkeypatch):
    (elsewhere.parent / "shared" / "data").mkdir(parents=True)
    chosen = tmp_path / "my data"
    chosen.mkdir()
    monkeypatch.setenv("STRUCTATTN_DATA", str(chosen))
    assert settings.data_dir() == chosen


def test_env_var_naming_no_folder_is_an_error_even_with_a_fallback(elsewhere, tmp_path, monkeypatch):
    (elsewhere.parent / "shared" / "data").mkdir(parents=True)
    monkeypatch.setenv("STRUCTATTN_DATA", str(tmp_path / "typo"))
    assert settings.data_dir_candidate() == tmp_path / "typo"  # where the data tests look (and skip)
    with pytest.raises(UserError, match=r"STRUCTATTN_DATA=.*typo is not a folder"):
        settings.data_dir()


def test_cli_without_data_folder_says_so_in_one_line(elsewhere, capsys):
    assert main(["preprocess", "--dataset", "sst2", "--split", "dev"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "STRUCTATTN_DATA is not set" in err
