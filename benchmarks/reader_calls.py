"""Seconds per `Reader` call on passages the parse cache does not hold: the first call of a fresh process (the
model and spaCy's pipeline load) and the calls after it, for one or more source trees, interleaved.

    .venv/bin/python benchmarks/reader_calls.py --src src --src /tmp/old/src --reps 3 --out results/bench_reader_calls.md

Each repetition runs one process per source tree in turn (`PYTHONPATH=<tree>`), with an empty parse cache: it
loads the shipped `sgnet-squad2` and answers 4 questions, each about a passage of its own.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_name  # noqa: E402

CALLS = 4
_CHILD = f"""
import sys, time
from structattn import Reader
reader = Reader.from_pretrained("sgnet-squad2")
times = []
for n in range({CALLS}):
    started = time.perf_counter()
    reader(question=f"Who built wall {{n}}?", context=f"The wall {{n}} of Town{{sys.argv[1]}} was built in {{n}}{{sys.argv[1]}} AD.")
    times.append(time.perf_counter() - started)
print(" ".join(map(str, times)))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", action="append", required=True, help="a source tree (the folder holding structattn/)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    first: dict[str, list[float]] = {s: [] for s in args.src}
    later: dict[str, list[float]] = {s: [] for s in args.src}
    for rep in range(args.reps):
        for src in args.src:
            env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), STRUCTATTN_CACHE=tempfile.mkdtemp(),
                       OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
            out = subprocess.run([sys.executable, "-c", _CHILD, f"{rep}{len(first[src])}"], env=env,
                                 capture_output=True, text=True, check=True).stdout.split()
            times = [float(t) for t in out]
            first[src].append(times[0])
            later[src].extend(times[1:])
    lines = ["# Seconds per Reader call (sgnet-squad2, passages not in the parse cache)", "",
             f"Command: `python benchmarks/reader_calls.py {' '.join('--src ' + s for s in args.src)} --reps "
             f"{args.reps}`; CPU: {os.cpu_count()}-core {cpu_name()}, load average {os.getloadavg()[0]:.1f} at the "
             f"end; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}.", "",
             "| source tree | first call, median (s) | later calls, median (s) |", "|---|---|---|"]
    lines += [f"| `{s}` | {statistics.median(first[s]):.2f} | {statistics.median(later[s]):.2f} |" for s in args.src]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
