"""Training throughput (target tokens per second) of the NMT smoke runs: Joey NMT's log and our summary.json.

    python experiments/peers/nmt_throughput.py JOEY_TRAIN_LOG OUR_RUN_DIR... [--cpu MONITOR.jsonl --pids JOEY,OURS...]

Joey: its own "Tokens per Sec" lines (every logging_freq updates; wall time of the training steps, validation
excluded), summed over the windows: tokens = rate x window, the window being the time since the previous line
(the first: since "EPOCH 1"). Ours: summary.json's target_tokens_per_second (target tokens / wall time of the
training steps). Both count non-padding target tokens including </s>.
With --cpu (a file of {"t": wall, "<pid>": cpu seconds} lines sampled every second), each figure is also given per
CPU second of its own process over the same window, which does not depend on how busy the shared machine was.
"""
from __future__ import annotations

import argparse
import json
import re
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _time(line: str) -> float | None:
    m = STAMP.match(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


def joey_windows(log: Path):
    start, windows = None, []
    for line in log.read_text().splitlines():
        if "joeynmt.training - EPOCH 1" in line and start is None:
            start = _time(line)
        m = re.search(r"Step:\s+(\d+).*Tokens per Sec:\s+([\d.]+)", line)
        if m and start is not None:
            t = _time(line)
            windows.append((start, t, float(m.group(2)) * (t - start), int(m.group(1))))
            start = t
    return windows


def cpu_between(samples, pid: str, t0: float, t1: float) -> float | None:
    def at(t):
        best = None
        for s in samples:
            if pid in s and s["t"] <= t:
                best = s[pid]
        return best
    a, b = at(t0), at(t1)
    return None if a is None or b is None else b - a


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("joey_log", type=Path)
    ap.add_argument("ours", type=Path, nargs="*")
    ap.add_argument("--cpu", type=Path)
    ap.add_argument("--pids", default="", help="joey pid, then one pid per OURS dir, comma-separated")
    args = ap.parse_args()
    samples = [json.loads(x) for x in args.cpu.read_text().splitlines()] if args.cpu else []
    pids = args.pids.split(",") if args.pids else []
    rows = []
    w = joey_windows(args.joey_log)
    tokens, wall = sum(x[2] for x in w), sum(x[1] - x[0] for x in w)
    row = {"run": "joeynmt", "updates": w[-1][3] if w else 0, "target_tokens": round(tokens),
           "train_seconds": round(wall, 1), "tokens_per_second": round(tokens / wall, 1) if wall else None}
    row["windows"] = [{"to_update": u, "seconds": round(t1 - t0, 1), "tokens": round(n)} for t0, t1, n, u in w]
    if samples and pids:  # over the windows the CPU samples cover
        covered = [x for x in w if x[0] >= samples[0]["t"] and x[1] <= samples[-1]["t"]]
        if covered:
            cpu = cpu_between(samples, pids[0], covered[0][0], covered[-1][1])
            n, secs = sum(x[2] for x in covered), sum(x[1] - x[0] for x in covered)
            row.update(cpu_windows_to_update=[x[3] for x in covered], cpu_seconds=round(cpu, 1),
                       tokens_per_cpu_second=round(n / cpu, 1), cpu_share=round(cpu / secs, 3))
    rows.append(row)
    for i, run in enumerate(args.ours):
        s = json.loads((run / "summary.json").read_text())
        tps = s["target_tokens_per_second"]
        row = {"run": f"structattn {s['variant']}", "updates": s["updates"], "target_tokens": round(tps * s["train_seconds"]),
               "train_seconds": s["train_seconds"], "tokens_per_second": tps}
        if samples and len(pids) > i + 1:
            end = (run / "best").stat().st_mtime  # written by the evaluation right after the last update
            # (20 dev sentences decoded first: a few seconds, counted here as training time)
            start = max(end - s["train_seconds"], samples[0]["t"])  # the part of the training the samples cover
            cpu = cpu_between(samples, pids[i + 1], start, end)
            if cpu:  # the process's CPU share over that part; tokens per CPU second = tokens/s / share
                share = cpu / (end - start)
                row.update(cpu_share=round(share, 3), cpu_share_over_seconds=round(end - start, 1),
                           tokens_per_cpu_second=round(tps / share, 1))
        rows.append(row)
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
