"""Facts about the machine and measurements shared by the benchmark scripts (CPU model, instruction sets,
peak tensor memory of a step, the process's resident memory)."""
from __future__ import annotations

import gc
import json
import os
import platform
import resource
import tempfile


def cpu_name() -> str:
    """The 'model name' line of /proc/cpuinfo (or what platform knows)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags(wanted=("avx2", "avx512f", "avx512_bf16", "amx_tile")) -> str:
    """Which of the instruction-set extensions that matter for torch's CPU kernels the CPU reports."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return ", ".join(f"{f} {'yes' if f in have else 'no'}" for f in wanted)
    except OSError:
        pass
    return "unknown (no /proc/cpuinfo)"


def peak_bytes(fn) -> int:
    """Peak of live tensor bytes that ``fn`` allocates above the state at its start (torch.profiler trace)."""
    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = json.load(fh)["traceEvents"]
    memory = [e["args"] for e in events if e.get("name") == "[memory]"]
    if not memory:
        return 0
    # "Total Allocated" counts every byte still live that any profiler run saw allocated (earlier
    # variants' gradients too), so measure from the level just before this step's first allocation.
    start = memory[0]["Total Allocated"] - memory[0]["Bytes"]
    return max(0, *(m["Total Allocated"] - start for m in memory))


def rss_bytes() -> int:
    """This process's resident set size now (Linux: /proc/self/statm)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_kib() -> int:
    """This process's peak resident set size so far, in KiB (what Linux and ``/usr/bin/time -v`` report)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def cpu_description() -> str:
    """One line: CPU model, vector instruction sets, torch version and threads."""
    import torch

    return f"{cpu_name()}; {cpu_flags()}; torch {torch.__version__}, {torch.get_num_threads()} threads"
