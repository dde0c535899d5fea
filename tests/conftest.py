"""Session-wide test settings."""
import atexit
import os
import shutil
import tempfile

# torch.compile tests must compile the code under test, never reuse a graph that an older checkout left in the
# machine-wide inductor cache (/tmp/torchinductor_$USER). Set before any test imports torch._inductor.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="structattn-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

# The `triton` kernel's tests run it on CPU under Triton's interpreter, which Triton selects while it defines
# kernels, its own library's included: set before anything imports triton (torch does, with torch._dynamo).
os.environ.setdefault("TRITON_INTERPRET", "1")
