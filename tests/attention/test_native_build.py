"""The fused kernel's build name (one per torch installation, compiler and flags) and when a build is announced."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from structattn.attention import native


def _installation(**changes) -> dict:
    """The arguments of native.build_key for a torch installation in /envs/a (what one virtual environment has)."""
    base = dict(source="// kernel", torch_version="2.13.0+cpu",
                include_paths=["/envs/a/lib/python3.11/site-packages/torch/include",
                               "/envs/a/lib/python3.11/site-packages/torch/include/torch/csrc/api/include"],
                library_paths=["/envs/a/lib/python3.11/site-packages/torch/lib"],
                python_include="/usr/include/python3.11", extension_suffix=".cpython-311-x86_64-linux-gnu.so",
                compiler="/usr/bin/x86_64-linux-gnu-g++-12", compiler_version="c++ (Debian 12.2.0-14) 12.2.0",
                cflags=["-O3", "-mavx2"], ldflags=["-fopenmp"], machine="x86_64", capability="AVX2")
    base.update(changes)
    return base


def test_two_torch_installations_get_two_build_names():
    env_a = _installation()
    env_b = _installation(include_paths=[p.replace("/envs/a/", "/envs/b/") for p in env_a["include_paths"]],
                          library_paths=[p.replace("/envs/a/", "/envs/b/") for p in env_a["library_paths"]])
    assert native.build_key(**env_a) != native.build_key(**env_b)
    assert native.build_key(**env_a) == native.build_key(**_installation())  # the same installation finds its build


@pytest.mark.parametrize("change", [
    {"compiler_version": "c++ (Debian 13.1.0) 13.1.0"}, {"compiler": "/usr/bin/clang++-17"},
    {"cflags": ["-O3", "-mavx512f"]}, {"ldflags": []}, {"source": "// kernel v2"}, {"torch_version": "2.14.0+cpu"},
    {"capability": "AVX512"}, {"extension_suffix": ".cpython-312-x86_64-linux-gnu.so"},
])
def test_everything_that_changes_the_binary_changes_the_name(change):
    assert native.build_key(**_installation()) != native.build_key(**_installation(**change))


def test_this_installation_is_keyed_by_its_own_torch_folders():
    from torch.utils import cpp_extension

    here = native._installation()
    assert here["include_paths"] == [os.path.realpath(p) for p in cpp_extension.include_paths()]
    assert native._build_name() == native.build_key(**here)


@pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not on PATH")
def test_needs_build_follows_ninja(tmp_path):
    # a one-rule ninja project standing in for torch's build folder: main.cpp -> <name>.so
    name = "structattn_mixed_test"
    assert native.needs_build(name, str(tmp_path))  # empty folder: a build
    (tmp_path / "main.cpp").write_text("// v1\n")
    (tmp_path / "build.ninja").write_text(f"rule cp\n  command = cp $in $out\nbuild {name}.so: cp main.cpp\n")
    assert native.needs_build(name, str(tmp_path))  # no library yet
    assert os.system(f"ninja -C {tmp_path} > /dev/null") == 0
    assert not native.needs_build(name, str(tmp_path))  # built and up to date: only a load
    later = time.time() + 5
    os.utime(tmp_path / "main.cpp", (later, later))
    assert native.needs_build(name, str(tmp_path))  # the source is newer: ninja would compile


def test_the_build_line_names_the_folder_and_the_expected_time(capsys):
    native.announce_build("/cache/torch_extensions/py311_cpu/structattn_mixed_x")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "building the fused CPU attention kernel in /cache/torch_extensions" in err
    assert native.EXPECTED_BUILD in err and "structattn.attention.build_kernel" in err


def _ninja_build(folder, name: str) -> None:
    """A complete build in ``folder`` as ninja sees it (one rule: main.cpp -> <name>.so), standing in for torch's."""
    folder.mkdir(parents=True)
    (folder / "main.cpp").write_text("// v1\n")
    (folder / "build.ninja").write_text(f"rule cp\n  command = cp $in $out\nbuild {name}.so: cp main.cpp\n")
    assert os.system(f"ninja -C {folder} > /dev/null") == 0


def _snapshot(root) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*"))}


@pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not on PATH")
def test_an_installed_build_is_used_read_only_and_new_builds_go_to_the_kernel_dir(tmp_path, monkeypatch):
    user, own, name = tmp_path / "user", tmp_path / "own", "structattn_mixed_test"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(user))
    monkeypatch.setenv("STRUCTATTN_KERNEL_DIR", str(own))
    assert native.build_folder(name) == str(own / name)  # nothing installed: built in the kernel dir
    assert not user.exists()  # and nothing made in the user's cache
    _ninja_build(user / name, name)
    before = _snapshot(user)
    assert native.build_folder(name) == str(user / name)  # complete and up to date: loaded where it is
    assert _snapshot(user) == before
    monkeypatch.delenv("STRUCTATTN_KERNEL_DIR")
    assert native.build_folder(name) == str(user / name)  # no kernel dir: torch's cache, as before


@pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not on PATH")
def test_the_build_tests_leave_the_users_cached_kernel_untouched(tmp_path):
    """The tests that build, lock or load the kernel, run as `make test` runs them, with a user's cache that holds
    this installation's build: not one of its files is rewritten, and nothing is added to the cache."""
    import subprocess
    import sys

    user = tmp_path / "torch_extensions"
    _ninja_build(user / native._build_name(), native._build_name())
    before = _snapshot(user)
    env = {k: v for k, v in os.environ.items() if k not in ("STRUCTATTN_KERNEL_DIR", "STRUCTATTN_NO_NATIVE")}
    env["TORCH_EXTENSIONS_DIR"] = str(user)
    tests = Path(__file__).resolve().parent
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tests / "test_native_build.py"), "-k", "not untouched",
                          str(tests / "test_kernels.py") + "::test_native_load_falls_back_when_the_build_lock_stays_taken",
                          str(tests / "test_fused_sparsity.py") + "::test_build_is_keyed_by_atens_capability_not_by_the_machine",
                          str(tests / "test_fused_sparsity.py") + "::test_compile_flags_name_the_capability_never_march_native"],
                         env=env, capture_output=True, text=True, timeout=600, cwd=tests.parents[1])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "[100%]" in res.stdout and "F" not in res.stdout.split("[")[0]
    assert _snapshot(user) == before
