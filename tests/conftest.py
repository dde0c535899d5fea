"""Session-wide test settings."""
import atexit
import os
import shutil
import tempfile

import pytest

# torch.compile tests must compile the code under test, never reuse a graph that an older checkout left in the
# machine-wide inductor cache (/tmp/torchinductor_$USER). Set before any test imports torch._inductor.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="structattn-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

# The `triton` kernel's tests run it on CPU under Triton's interpreter, which Triton selects while it defines
# kernels, its own library's included: set before anything imports triton (torch does, with torch._dynamo).
os.environ.setdefault("TRITON_INTERPRET", "1")

# The fused CPU kernel: tests never build into the user's extension cache. A complete build there (`make install`
# made it) is loaded read only; any build a test causes goes to this run's temporary folder (native.build_folder).
if "STRUCTATTN_KERNEL_DIR" not in os.environ:
    _kernels = tempfile.mkdtemp(prefix="structattn-kernel-")
    os.environ["STRUCTATTN_KERNEL_DIR"] = _kernels
    atexit.register(shutil.rmtree, _kernels, ignore_errors=True)


def _installed_kernels() -> dict[str, tuple[int, int]]:
    """Every file of the fused kernel's builds in the user's torch extension cache: path -> (size, mtime in ns)
    (torch's transient `lock` file left out)."""
    from pathlib import Path

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "torch_extensions")
    found = {}
    for path in Path(os.path.realpath(root)).glob("**/structattn_mixed_*/*"):
        if path.is_file() and path.name != "lock":
            stat = path.stat()
            found[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return found


def pytest_sessionstart(session):
    session.config._installed_kernels = _installed_kernels()


def pytest_sessionfinish(session, exitstatus):
    """The suite must leave the user's build of this installation's kernel as it found it (a file the tests rebuilt
    or rewrote: a failure); the builds of other checkouts sharing the cache are not compared."""
    before = getattr(session.config, "_installed_kernels", None)
    if not before:
        return
    from structattn.attention import native  # this checkout's build: other checkouts' builds may change meanwhile

    folder = native.installed_folder(native._build_name()) + os.sep
    after = _installed_kernels()
    changed = sorted(p for p, facts in before.items() if p.startswith(folder) and after.get(p) != facts)
    if changed:
        print(f"\nthe tests changed the installed fused kernel: {', '.join(changed[:5])}", flush=True)
        session.exitstatus = 1


@pytest.fixture(autouse=True)
def _no_signal_region_left_open():
    """A test leaves no region that a signal must not cut open (`structattn.stopping.hold` without its `release`):
    one left open makes every later SIGINT or SIGTERM of this process only remembered, never raised."""
    yield
    import sys

    stopping = sys.modules.get("structattn.stopping")
    if stopping is not None and stopping._depth:
        depth, stopping._depth, stopping._pending = stopping._depth, 0, None
        pytest.fail(f"the test left {depth} signal-deferring region(s) of structattn.stopping open")
