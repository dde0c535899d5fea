"""The path checks every command makes before a model loads: one line naming the flag, the path and what to do."""
from __future__ import annotations

import os

import pytest

from structattn.errors import UserError
from structattn.paths import check_input_file, check_input_folder, check_output_file, check_output_folder

needs_permissions = pytest.mark.skipif(os.geteuid() == 0, reason="root may write in a read-only folder; run the "
                                                                 "permission checks as another user")


def test_standard_streams_pass(tmp_path):
    assert check_input_file("-", "--input") == "-" and check_input_file(None, "--input") is None
    assert check_output_file("-", "--output") == "-" and check_output_file(None, "--output") is None


def test_input_file_missing_or_a_folder(tmp_path):
    with pytest.raises(UserError, match=r"^--input: input file \S+missing.txt does not exist; check the path$"):
        check_input_file(tmp_path / "missing.txt", "--input")
    with pytest.raises(UserError, match=r"^--predictions: input \S+ is a folder, not a file; give a file$"):
        check_input_file(tmp_path, "--predictions")
    (tmp_path / "ok.txt").write_text("x")
    assert check_input_file(str(tmp_path / "ok.txt"), "--input") == str(tmp_path / "ok.txt")


def test_input_folder_missing_or_a_file(tmp_path):
    with pytest.raises(UserError, match="--model .*nope: no such folder"):
        check_input_folder(tmp_path / "nope", "--model")
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="--model .*f: is a file; give a folder"):
        check_input_folder(tmp_path / "f", "--model")


def test_output_file_in_a_missing_folder_or_a_folder(tmp_path):
    with pytest.raises(UserError, match=r"--output \S+nodir/x.trees: the folder \S+nodir does not exist; create it"):
        check_output_file(tmp_path / "nodir" / "x.trees", "--output")
    with pytest.raises(UserError, match=r"--output \S+: is a folder; give a file name"):
        check_output_file(tmp_path, "--output")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match=r"file is a file, not a folder"):
        check_output_file(tmp_path / "file" / "x.trees", "--output")
    assert not (tmp_path / "nodir").exists()  # nothing created


def test_output_folder_may_be_new_but_not_a_file(tmp_path):
    assert check_output_folder(tmp_path / "runs" / "a") == str(tmp_path / "runs" / "a")
    assert not (tmp_path / "runs").exists()  # the trainer creates it, the check does not
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match=r"--output-dir \S+f: is a file; give a folder"):
        check_output_folder(tmp_path / "f")
    with pytest.raises(UserError, match=r"f is a file, not a folder"):
        check_output_folder(tmp_path / "f" / "run")


@needs_permissions
def test_not_writable(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(UserError, match="not writable"):
            check_output_file(locked / "x.txt", "--output")
        with pytest.raises(UserError, match="not writable"):
            check_output_folder(locked / "run")
    finally:
        locked.chmod(0o755)


@pytest.fixture
def read_only_mount(tmp_path):
    """A read-only tmpfs (needs mount: root on Linux); skipped where it cannot be made."""
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here ({made.stderr.decode(errors='replace').strip()})")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def test_a_read_only_file_system_is_named_as_such(read_only_mount):
    with pytest.raises(UserError, match=r"--output .*out.txt: not writable \(read-only file system\)"):
        check_output_file(str(read_only_mount / "out.txt"), "--output")
    with pytest.raises(UserError, match=r"not writable \(read-only file system\); choose another folder"):
        check_output_folder(str(read_only_mount / "run"))
