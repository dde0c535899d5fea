"""A process SIGKILLed between the two renames that replace ``best/`` leaves it recoverable.

The kill is real: a subprocess with STRUCTATTN_KILL_BETWEEN_RENAMES set dies by SIGKILL right after
the old folder was moved aside, before the new one is renamed in.
"""
import os
import subprocess
import sys
import textwrap


from structattn.train.checkpoint import recover_atomic_dirs

WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from structattn.train.checkpoint import AtomicDir
    with AtomicDir(Path(sys.argv[1])) as tmp:
        (tmp / "version.txt").write_text(sys.argv[2])
""")


def _write(final, version, kill=False):
    env = dict(os.environ)
    env.pop("STRUCTATTN_KILL_BETWEEN_RENAMES", None)
    if kill:
        env["STRUCTATTN_KILL_BETWEEN_RENAMES"] = final.name
    return subprocess.run([sys.executable, "-c", WRITER, str(final), version], env=env, capture_output=True,
                          text=True, timeout=120)


def test_kill_between_renames_then_recover_restores_last_committed(tmp_path):
    final = tmp_path / "best"
    assert _write(final, "1").returncode == 0
    killed = _write(final, "2", kill=True)
    assert killed.returncode == -9, killed.stderr
    assert not final.exists()  # the defect: between the renames there is no best/
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == [".best.old", ".best.tmp"]

    assert recover_atomic_dirs(tmp_path) == [final]
    assert (final / "version.txt").read_text() == "1"
    assert [p.name for p in tmp_path.iterdir()] == ["best"]  # leftovers gone

    assert _write(final, "3").returncode == 0  # and the folder is writable again
    assert (final / "version.txt").read_text() == "3"


def test_recover_deletes_leftovers_beside_a_committed_folder(tmp_path):
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "v").write_text("new")
    (tmp_path / ".best.old-12").mkdir()  # killed after the commit, before the old copy was deleted
    (tmp_path / ".checkpoint-5.tmp-ranks").mkdir()  # killed while writing a checkpoint
    (tmp_path / "keep.tmp-1").mkdir()  # not an AtomicDir name: not touched
    assert recover_atomic_dirs(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best", "keep.tmp-1"]
    assert (tmp_path / "best" / "v").read_text() == "new"
