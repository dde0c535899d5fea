"""forked_map: results in order, and a pool that ends whatever signal handlers the calling command has set."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from structattn.train.forking import contiguous_chunks, forked_map

needs_fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork here")


@needs_fork
def test_results_come_back_in_the_order_of_the_chunks():
    keys = [k // 3 for k in range(20)]  # runs of three equal keys
    bounds = contiguous_chunks(keys, 4)
    assert forked_map(lambda b: (b, sum(keys[b[0]:b[1]])), bounds, 2) == [(b, sum(keys[b[0]:b[1]])) for b in bounds]


# The calling command's situation: the command line's handlers turn SIGTERM into an exception, and the call may come
# from inside a region that a signal must not cut (the handler then only remembers the signal). The pool ends its
# workers by SIGTERM: each worker must end on it, silently.
_CALLER = textwrap.dedent("""
    from structattn import stopping
    from structattn.train.forking import forked_map
    with stopping.handling_signals(), stopping.deferred():
        for _ in range(REPEATS):  # a worker that survives its SIGTERM hangs the pool in some of the calls, not all
            out = forked_map(lambda b: b[1] - b[0], [(0, 3), (3, 7), (7, 8), (8, 10)], 2)
        print(out, flush=True)
""")
REPEATS = 30


@needs_fork
def test_the_pool_ends_its_workers_under_the_command_lines_signal_handlers():
    proc = subprocess.Popen([sys.executable, "-c", f"REPEATS = {REPEATS}\n{_CALLER}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the caller and any worker it waits for
        proc.communicate()
        pytest.fail("forked_map never returned: the pool waited for a worker that its SIGTERM did not end")
    assert proc.returncode == 0, err
    assert out.strip() == "[3, 4, 1, 2]"
    assert "Traceback" not in err and "Stopped" not in err  # no worker turned the pool's SIGTERM into an exception
