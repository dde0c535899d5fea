import pytest

from structattn.io import atomic_write_text

from structattn.train.checkpoint import AtomicDir


def test_atomic_dir_leaves_old_on_failure(tmp_path):
    final = tmp_path / "ckpt"
    with AtomicDir(final) as d:
        (d / "a").write_text("1")
    with pytest.raises(RuntimeError):
        with AtomicDir(final) as d:
            (d / "a").write_text("2")
            raise RuntimeError("killed")
    assert (final / "a").read_text() == "1"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_atomic_write_text(tmp_path):
    atomic_write_text(tmp_path / "x" / "f.txt", "hello")
    assert (tmp_path / "x" / "f.txt").read_text() == "hello"

