"""Wall time of `structattn --help` and of every `structattn COMMAND --help` (each a fresh process), and whether
any of them imports torch: the command line must answer help in under a second.

    .venv/bin/python benchmarks/cli_help.py --reps 5 --out results/bench_cli_help.md

Each repetition runs every command once, in turn (interleaved), as ``python -m structattn.cli ... --help``;
the report gives each command's median and the slowest median, the CPU and the command.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_name  # noqa: E402

# imports torch? printed by the child after the help (argparse exits through SystemExit)
_CHILD = ("import sys, atexit\n"
          "atexit.register(lambda: print('TORCH=' + str('torch' in sys.modules), file=sys.stderr))\n"
          "from structattn.cli import main\n"
          "sys.exit(main(sys.argv[1:]))\n")


def commands() -> list[list[str]]:
    from structattn.cli import build_parser
    from structattn.cli_grammar import subparser_actions

    names = list(dict.fromkeys(p.prog.split()[1] for p in subparser_actions(build_parser())[0].choices.values()))
    return [["--help"]] + [[name, "--help"] for name in names]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None, help="also write the markdown report here")
    args = ap.parse_args()
    runs = commands()
    times: dict[str, list[float]] = {" ".join(r): [] for r in runs}
    torch_imported = set()
    for _ in range(args.reps):
        for argv in runs:
            started = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True)
            times[" ".join(argv)].append(time.perf_counter() - started)
            if res.returncode != 0:
                raise SystemExit(f"structattn {' '.join(argv)} failed: {res.stderr}")
            if "TORCH=True" in res.stderr:
                torch_imported.add(" ".join(argv))
    medians = {k: statistics.median(v) for k, v in times.items()}
    lines = ["# `structattn --help` and `structattn COMMAND --help`: wall time", "",
             f"Command: `python benchmarks/cli_help.py --reps {args.reps}`; CPU: {os.cpu_count()}-core {cpu_name()}, "
             f"load average {os.getloadavg()[0]:.1f} at the end (other work beside it); {len(runs)} help pages, "
             f"each a fresh `python -m structattn.cli` process, interleaved, {args.reps} times.", "",
             "| help page | median wall time (s) |", "|---|---|"]
    lines += [f"| `structattn {k}` | {v:.2f} |" for k, v in medians.items()]
    lines += ["", f"Slowest median: {max(medians.values()):.2f} s; pages that imported torch: "
                  f"{', '.join(sorted(torch_imported)) or 'none'}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 1 if torch_imported else 0


if __name__ == "__main__":
    sys.exit(main())
