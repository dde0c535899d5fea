#!/usr/bin/env bash
# Resident memory of the CPU reader's training (the recipe of `experiments/run_reading_experiments.sh reader-cpu`) under
# glibc's default allocator settings and with MALLOC_MMAP_THRESHOLD_=1048576 (tensors of 1 MiB and more mapped and
# unmapped whole instead of carved from the heap, which glibc's default moves up to 32 MiB as memory is freed).
#
#   bash benchmarks/reader_memory.sh [UPDATES] [OUT.json]      (defaults: 80 updates, results/diagnostics/reader_memory_cpu.json)
#
# Both runs start together, one thread each (the same load on both), on the first 8,000 questions of squad2_plus11
# with batches of 32 windows of 384 tokens, bf16 autocast, no evaluation and no checkpoint. The resident set size of
# each process is read every 5 s with its update count; the summary gives, per quarter of the updates, the lowest,
# median and highest RSS, and the seconds per update (from update 10 on: features and the first updates excluded).
# Needs ../shared/data (or STRUCTATTN_DATA) and the .venv of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
UPDATES=${1:-80}
OUT=${2:-results/diagnostics/reader_memory_cpu.json}
WORK=$(mktemp -d)
FLAGS="--task squad2_plus11 --precision bf16 --batch-size 32 --eval-batch-size 64 --epochs 1 --max-length 384 --stride 128
  --learning-rate 1e-4 --warmup-ratio 0.1 --group-by-length true --eval-every 0 --max-steps $UPDATES
  --max-train-examples 8000 --max-eval-examples 64 --save-checkpoints false --keep-best-model false"

probe() {   # NAME ENV...: train, and log "time update rss_kb" every 5 s into $WORK/NAME.rss
  local name=$1 pid step; shift
  : > "$WORK/$name.log"
  # shellcheck disable=SC2086
  env "$@" OMP_NUM_THREADS=1 .venv/bin/structattn train $FLAGS --output-dir "$WORK/$name" > "$WORK/$name.log" 2>&1 &
  pid=$!
  while kill -0 $pid 2>/dev/null; do
    step=$(tr '\r' '\n' < "$WORK/$name.log" | grep -o "[0-9]*/$UPDATES \[" | tail -1 | cut -d/ -f1 || true)
    echo "$(date +%s.%N) ${step:-0} $(awk '/VmRSS/{print $2}' /proc/$pid/status 2>/dev/null)"
    sleep 5
  done > "$WORK/$name.rss"
  wait $pid || { echo "$name failed: $WORK/$name.log" >&2; tail -5 "$WORK/$name.log" >&2; return 1; }
}

probe default & a=$!
probe mmap_1mib MALLOC_MMAP_THRESHOLD_=1048576 & b=$!
wait $a && wait $b
.venv/bin/python - "$WORK" "$UPDATES" "$OUT" <<'PY'
import json, statistics, sys
sys.path.insert(0, "benchmarks")
from machine import cpu_description
work, updates, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
result = {"command": f"bash benchmarks/reader_memory.sh {updates} {out}", "machine": cpu_description().replace(
    "2 threads", "1 thread a run"), "updates": updates, "runs": {}}
for name in ("default", "mmap_1mib"):
    rows = [line.split() for line in open(f"{work}/{name}.rss")]
    rows = [(float(t), int(s), int(r)) for t, s, *r_ in rows for r in r_ if r]
    quarters = []
    for q in range(4):
        lo, hi = q * updates // 4, (q + 1) * updates // 4
        rss = [r / 1e6 for _, s, r in rows if lo <= s < hi or (q == 3 and s == updates)]
        if rss:
            quarters.append({"updates": f"{lo}-{hi}", "rss_gb_min": round(min(rss), 2),
                             "rss_gb_median": round(statistics.median(rss), 2), "rss_gb_max": round(max(rss), 2)})
    timed = [(t, s) for t, s, _ in rows if s >= 10]
    per_update = (timed[-1][0] - timed[0][0]) / max(1, timed[-1][1] - timed[0][1]) if len(timed) > 1 else None
    if len(quarters) < 4 or per_update is None:
        sys.exit(f"{name}: too few readings ({len(rows)}) to summarise; see the run's log")
    result["runs"][name] = {"quarters": quarters, "seconds_per_update": round(per_update, 2)}
print(json.dumps(result, indent=1))
open(out, "w").write(json.dumps(result, indent=1) + "\n")
PY
rm -rf "$WORK"
