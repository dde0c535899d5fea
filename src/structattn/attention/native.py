"""The fused CPU kernel for gated local/global attention (``mixed_attention.cpp``), built on first use.

Notation: b batch, h heads, n queries, m keys, d head size; G gate heads (1 = one gate per token shared by
all heads, h = one gate per head).

The kernel computes, for every query row i of every (batch, head) pair, with s = scale * q k^T,

    e_j  = exp(s_ij - max_j s_ij)            over the keys the base (padding) mask allows
    P_ij = (1 - g_i) * e_j / sum(e) + g_i * L_ij e_j / sum(L e)          (L = local mask, one exponential)
    O_i  = sum_j P_ij v_j

in one pass per row block (one GEMM for q k^T, one row sweep, one GEMM for P v), with the same recompute
scheme as flash attention for the backward pass: only the global log-normaliser of each row is saved (the
[b, h, n] float SDPA keeps), never an n x m matrix; the local normaliser is recomputed from the local keys.
The products of a row block run over the keys its rows may attend (padded keys cost nothing) and the local
part of each row over the span of its local pattern (O(n w) for windows and sentence-bounded masks).

Guards: a row whose local maximum lies more than ``kGap`` (60) below the global maximum (where the shared
exponential would underflow) recomputes its local part from the local maximum; a row with no allowed
key gives 0 and zero gradients (as SDPA does); a row whose local pattern is empty falls back to the base
row. Attention dropout uses a counter-based hash of (seed, element index), so backward regenerates the
same mask without storing it.

Instruction sets: the module is built for the CPU capability ATen dispatches to on this machine
(``torch.backends.cpu.get_cpu_capability()``: AVX512, AVX2 or DEFAULT; ``ATEN_CPU_CAPABILITY`` lowers it) with
ATen's vectorised exponential (``at::vec``, ``exp_u20``) and ATen's exported CPU BLAS wrapper
(``at::native::cpublas::brgemm``) for the float32 products. The compiler flags name that capability, never
``-march=native``, and the build is keyed by it: a cache shared by machines of different CPUs holds one
build per capability, and each machine loads the one its CPU can run. float64 inputs run the same row code
with ``std::exp`` and plain loops (``torch.autograd.gradcheck`` runs through it); bf16/fp16 inputs are upcast
to float32 by the caller. If no compiler or no ``ninja`` is available, or ATen's brgemm does not run on this
CPU (a product is tried after loading), `load` returns None and callers use the two-SDPA kernel
instead; a build another process holds for longer than the lock time-out does the same.

Build name: `build_key` hashes everything that changes the binary (the source, torch's version and the
include and library folders of the torch installation it is compiled against, Python's include folder and
extension suffix, the compiler's resolved path and version line, the flags, the machine and the capability).
Two environments sharing one ``~/.cache/torch_extensions`` therefore get two build folders and never rebuild
each other's; the same environment finds its build again and only loads it.

Where: torch's extension cache (``~/.cache/torch_extensions/py311_cpu``, or ``$TORCH_EXTENSIONS_DIR``), unless
``STRUCTATTN_KERNEL_DIR`` names another folder for the builds (the test suite sets a temporary one, so that
nothing it builds lands in the user's cache). Even then a complete, up-to-date build in torch's cache (what
``make install`` built) is loaded from there, read only. A complete build is imported directly (no compiler, no
ninja run, nothing written), so the first call after the install only loads it.

Visible builds: a line on stderr (`announce_build`, with the expected time) precedes every compilation,
whether the library is missing or out of date; ``python -m structattn.attention.build_kernel`` (run by
``make install``) compiles it ahead of first use, which then only loads it. The first-use build stays the
fallback.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import warnings
from pathlib import Path

import torch

from ..errors import UserError

_SOURCE_FILE = Path(__file__).with_name("mixed_attention.cpp")

_FUNCTIONS = ["mixed_forward", "mixed_forward_gated", "mixed_backward", "dropout_keep", "probe"]
_TORCH_LOCK = "lock"   # the FileBaton torch's cpp_extension creates in the build folder while it builds
LOCK_TIMEOUT_S = 600.0  # default wait for another process's build (STRUCTATTN_NATIVE_LOCK_TIMEOUT overrides)
# measured: `python -m structattn.attention.build_kernel` on a 2-core AMD EPYC with other work beside it, torch 2.13
EXPECTED_BUILD = "about a minute of CPU time, 2 to 4 minutes on a busy 2-core machine"
_CFLAGS = ["-O3", "-fopenmp", "-fno-math-errno"]
_LDFLAGS = ["-fopenmp"]
_log = logging.getLogger("structattn")
_lock = threading.Lock()
_module = None
_failed: str | None = None


class BuildLockTimeout(RuntimeError):
    """Our build lock stayed taken by another process for longer than the time-out."""


# ATen's capability -> the compiler flags its own kernels of that capability are built with
_CAPABILITY_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma", "-mf16c"],
    "AVX2": ["-mavx2", "-mfma", "-mf16c"],
    "DEFAULT": [],
}


def capability() -> str:
    """The instruction set the module is built for: ATen's CPU capability when it is one of
    `_CAPABILITY_FLAGS` (``ATEN_CPU_CAPABILITY=avx2`` lowers it, as for ATen's own kernels), else DEFAULT."""
    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # an old or unusual build: the portable code
        return "DEFAULT"
    return cap if cap in _CAPABILITY_FLAGS and platform.machine() in ("x86_64", "AMD64") else "DEFAULT"


@functools.cache
def _source() -> str:
    """The kernel's C++ source (read once: it keys the build name and is compiled)."""
    return _SOURCE_FILE.read_text(encoding="utf-8")


def _arch_flags(cap: str) -> list[str]:
    return [f"-DCPU_CAPABILITY={cap}", f"-DCPU_CAPABILITY_{cap}", *_CAPABILITY_FLAGS[cap]]


def build_key(*, source: str, torch_version: str, include_paths: list[str], library_paths: list[str],
              python_include: str, extension_suffix: str, compiler: str, compiler_version: str,
              cflags: list[str], ldflags: list[str], machine: str, capability: str) -> str:
    """The module name for one combination of everything that changes the binary (a pure function of its
    arguments: `_installation` gathers them for this process)."""
    parts = [source, torch_version, *include_paths, "|", *library_paths, "|", python_include, extension_suffix,
             compiler, compiler_version, *cflags, "|", *ldflags, machine, capability]
    return "structattn_mixed_" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


@functools.cache
def _compiler_identity() -> tuple[str, str]:
    """(resolved path, first line of ``--version``) of the C++ compiler torch runs (``$CXX`` or ``c++``);
    ("", "") when there is none (the build then fails and `load` falls back)."""
    from torch.utils import cpp_extension

    found = shutil.which(cpp_extension.get_cxx_compiler())
    if found is None:
        return "", ""
    try:
        out = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return os.path.realpath(found), (out.splitlines() or [""])[0]


def _installation() -> dict:
    """This process's arguments of `build_key`."""
    from torch.utils import cpp_extension

    cap = capability()
    compiler, compiler_version = _compiler_identity()
    return dict(source=_source(), torch_version=torch.__version__,
                include_paths=[os.path.realpath(p) for p in cpp_extension.include_paths()],
                library_paths=[os.path.realpath(p) for p in cpp_extension.library_paths()],
                python_include=os.path.realpath(sysconfig.get_paths()["include"]),
                extension_suffix=sysconfig.get_config_var("EXT_SUFFIX") or "",
                compiler=compiler, compiler_version=compiler_version,
                cflags=[*_CFLAGS, *_arch_flags(cap)], ldflags=list(_LDFLAGS),
                machine=platform.machine(), capability=cap)


def _build_name() -> str:
    """The module name of this installation (`build_key`)."""
    return build_key(**_installation())


def needs_build(name: str, build_dir: str) -> bool:
    """Whether loading ``name`` from ``build_dir`` will compile: the library or ninja's build file is missing, or
    ``ninja -n`` (a dry run) has work to do. When ninja cannot be asked, a build is assumed."""
    folder = Path(build_dir)
    if not (folder / f"{name}.so").is_file() or not (folder / "build.ninja").is_file():
        return True
    try:
        dry = subprocess.run(["ninja", "-n", "-C", str(folder)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return True
    return dry.returncode != 0 or "no work to do" not in dry.stdout


def announce_build(build_dir: str) -> None:
    """The line printed before every compilation (on stderr, whatever the logging level: it takes minutes)."""
    print(f"structattn: building the fused CPU attention kernel in {build_dir} ({EXPECTED_BUILD}; once per "
          "installation; `python -m structattn.attention.build_kernel` builds it ahead)", file=sys.stderr, flush=True)


def _lock_timeout() -> float:
    """Seconds to wait for another process's build: ``STRUCTATTN_NATIVE_LOCK_TIMEOUT`` or `LOCK_TIMEOUT_S`."""
    raw = os.environ.get("STRUCTATTN_NATIVE_LOCK_TIMEOUT")
    if raw is None:
        return LOCK_TIMEOUT_S
    try:
        return float(raw)
    except ValueError:
        raise UserError(f"STRUCTATTN_NATIVE_LOCK_TIMEOUT={raw!r} is not a number of seconds") from None


@contextlib.contextmanager
def build_lock(build_dir: str, timeout: float):
    """Hold an ``fcntl.flock`` on ``<build_dir>.structattn-lock`` while building or loading the module.

    The OS releases an flock when its owner dies, so a killed build never blocks later processes. While we
    hold it, torch's own ``lock`` file in ``build_dir`` can only be left over from a process that was killed
    (every builder of this module takes our lock first): it is removed, with a log line, because torch
    would wait for it forever. Raises `BuildLockTimeout` (naming the file) when another process
    holds the lock for longer than ``timeout`` seconds.
    """
    import fcntl  # POSIX only: elsewhere the ImportError makes load() fall back with its reason

    path = build_dir.rstrip(os.sep) + ".structattn-lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BuildLockTimeout(
                        f"another process has held {path} for more than {timeout:.0f} s while building the fused "
                        f"kernel; if no such process is running, remove {path}") from None
                time.sleep(0.2)
        stale = os.path.join(build_dir, _TORCH_LOCK)
        if os.path.exists(stale):
            os.remove(stale)
            _log.warning("structattn: removed the stale build lock %s left by a build that was killed", stale)
        yield path
    finally:
        os.close(fd)  # also releases the flock


def _ninja_on_path() -> None:
    """torch runs ``ninja`` from PATH. The ``ninja`` package (a dependency) installs it in the environment's
    scripts folder, which is not on PATH when Python runs by its full path without activating the
    environment: add that folder then."""
    if shutil.which("ninja") is not None:
        return
    try:
        import ninja
    except ImportError:  # torch then says "Ninja is required", which load() reports
        return
    os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", ""), ninja.BIN_DIR])


def installed_folder(name: str) -> str:
    """Where torch's own cache keeps the build ``name`` (``torch.utils.cpp_extension._get_build_directory``'s
    folder, found without creating it)."""
    from torch.utils import cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root is None:  # torch's default: <cache>/torch_extensions/py<version>_<accelerator>, as torch names it
        if torch.version.hip is not None:
            accelerator = "rocm" + torch.version.hip.replace(".", "")
        elif torch.version.cuda is not None:
            accelerator = "cu" + torch.version.cuda.replace(".", "")
        else:
            accelerator = "cpu"
        python = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}"
        root = os.path.join(cpp_extension.get_default_build_root(), f"{python}_{accelerator}")
    return os.path.join(root, name)


def build_folder(name: str) -> str:
    """The folder ``load`` uses for the build ``name``: the installed one when it is complete and up to date (read
    only), else ``$STRUCTATTN_KERNEL_DIR/<name>`` when that is set, else torch's cache folder (created)."""
    from torch.utils import cpp_extension

    installed = installed_folder(name)
    own = os.environ.get("STRUCTATTN_KERNEL_DIR")
    if not own or not needs_build(name, installed):
        return installed if os.path.isdir(installed) else cpp_extension._get_build_directory(name, verbose=False)
    folder = os.path.join(own, name)
    os.makedirs(folder, exist_ok=True)
    return folder


def _compile(name: str, build_dir: str, verbose: bool):
    """Build (when needed) and import the extension module from ``build_dir``; a complete build is imported
    directly, without torch's build step (which would lock, rewrite and re-run ninja in the folder)."""
    from torch.utils import cpp_extension

    _ninja_on_path()

    building = needs_build(name, build_dir)
    if not building:
        return cpp_extension._import_module_from_library(name, build_dir, True)
    announce_build(build_dir)
    started = time.perf_counter()
    module = cpp_extension.load_inline(
        name=name,
        cpp_sources=[_source()],
        functions=_FUNCTIONS,
        extra_cflags=[*_CFLAGS, *_arch_flags(capability())],
        extra_ldflags=list(_LDFLAGS),
        with_cuda=False,
        build_directory=build_dir,
        verbose=verbose,
    )
    print(f"structattn: built the fused CPU attention kernel in {time.perf_counter() - started:.0f} s",
          file=sys.stderr, flush=True)
    return module


def _fail(reason: str) -> None:
    global _failed
    _failed = reason
    warnings.warn(f"structattn: the fused CPU attention kernel is not available ({reason}); "
                  "using the two-SDPA kernel instead", RuntimeWarning, stacklevel=3)


def load(verbose: bool = False):
    """The compiled extension module, or None when it cannot be built here (the reason: `failure`).

    Set ``STRUCTATTN_NO_NATIVE=1`` to never build it. Builds once per installation (`build_key`) into
    torch's extension cache (``TORCH_EXTENSIONS_DIR``) or ``STRUCTATTN_KERNEL_DIR`` (`build_folder`),
    announcing it first (`announce_build`). Processes
    building or loading at the same time wait for each other through `build_lock` for at most
    ``STRUCTATTN_NATIVE_LOCK_TIMEOUT`` seconds (default `LOCK_TIMEOUT_S`), then fall back.
    """
    global _module, _failed
    if _module is not None or _failed is not None:
        return _module
    with _lock:
        if _module is not None or _failed is not None:
            return _module
        if os.environ.get("STRUCTATTN_NO_NATIVE") == "1":
            _failed = "disabled by STRUCTATTN_NO_NATIVE=1"
            return None
        if platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"):
            _failed = f"unsupported machine {platform.machine()}"
            return None
        timeout = _lock_timeout()
        try:
            name = _build_name()
            build_dir = build_folder(name)
            with build_lock(build_dir, timeout):
                module = _compile(name, build_dir, verbose)
            module.probe()  # ATen's brgemm raises where it does not run on this CPU
            _module = module
        except BuildLockTimeout as exc:
            _fail(str(exc))
        except Exception as exc:  # compiler, ninja, a writable cache or brgemm support missing: fall back
            _fail(f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
        return _module


def failure() -> str | None:
    """Why `load` returned None (None if it has not failed)."""
    return _failed
