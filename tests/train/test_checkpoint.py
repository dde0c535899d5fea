import pytest

from structattn.io import atomic_write_text

from structattn.train.checkpoint import AtomicDir, save_pretrained_atomically


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


class _Part:
    """A stand-in for a model or tokenizer: ``save_pretrained`` writes one file (or fails)."""

    def __init__(self, name: str, fail: bool = False):
        self.name, self.fail = name, fail

    def save_pretrained(self, folder):
        if self.fail:
            raise OSError("disk gone")
        (folder / self.name).write_text(self.name)


def test_save_pretrained_atomically_writes_every_part_then_the_extra_files(tmp_path):
    folder = tmp_path / "best"
    save_pretrained_atomically(folder, _Part("model.safetensors"), _Part("tokenizer.json"),
                               then=lambda tmp: (tmp / "metrics.json").write_text("{}"))
    assert {p.name for p in folder.iterdir()} >= {"model.safetensors", "tokenizer.json", "metrics.json"}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_save_pretrained_atomically_keeps_the_previous_folder_when_a_part_fails(tmp_path):
    folder = tmp_path / "best"
    save_pretrained_atomically(folder, _Part("old.bin"))
    with pytest.raises(OSError, match="disk gone"):
        save_pretrained_atomically(folder, _Part("new.bin"), _Part("tokenizer.json", fail=True))
    assert (folder / "old.bin").is_file() and not (folder / "new.bin").exists()
