#!/usr/bin/env bash
# The attention kernels' GPU figures on one CUDA machine, in two parts of about five minutes each; every part writes
# its reports and logs into OUTDIR as it goes, so a part stopped by its time limit still leaves what it measured.
#
#   bash benchmarks/attention_gpu.sh eager OUTDIR      # kernel tests on CUDA; eager cells: batch 32 x 128/512
#                                                      # (MiniLM, bert-base) and the overhead-bound batch 1 x 16/32
#   bash benchmarks/attention_gpu.sh compiled OUTDIR   # torch.compile (inductor) and CUDA graphs (reduce-overhead)
#   bash benchmarks/attention_gpu.sh graphs OUTDIR     # CUDA graphs alone, batch 1 x 16, dropout-free train + inference
#   bash benchmarks/attention_gpu.sh step OUTDIR       # the whole step in under eight minutes: opcheck and capture
#                                                      # tests on CUDA; compile time (empty / warm cache) and compiled
#                                                      # speed, stock vs SLA; eager and captured (reduce-overhead)
#                                                      # cells at batch 32 with peak memory
#
# Needs python (PY, default python3) with torch, transformers, triton and pytest (pytest-xdist for the tests in
# parallel); the package is imported from src/, so nothing is installed. results/bench_attention_gpu.md holds the
# figures these commands gave, with their device.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?part: eager, compiled, graphs or step}
out=${2:?OUTDIR}
PY=${PY:-python3}
case $part in eager|compiled|graphs|step) ;; *) echo "part: eager, compiled, graphs or step, not '$part'" >&2; exit 2 ;; esac
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

bench() {   # NAME SECONDS [attention_gpu.py flags...]: one report, $out/NAME.md, its log beside it
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$PY" benchmarks/attention_gpu.py "$@" --out "$out/$name.md" >"$out/$name.log" 2>&1
  echo "== $name: exit $? after ${SECONDS}s"
}

"$PY" - <<'PY' | tee "$out/device.txt"
import torch, transformers, triton
print(torch.cuda.get_device_name(), "| torch", torch.__version__, "| CUDA", torch.version.cuda,
      "| triton", triton.__version__, "| transformers", transformers.__version__)
PY

case $part in
  eager)
    timeout 150 "$PY" -m pytest -q -n 8 -p no:cacheprovider -o addopts="--import-mode=importlib" -rs \
      tests/attention/test_triton_kernel.py tests/attention/test_flex_kernel.py >"$out/kernel_tests.log" 2>&1
    echo "== kernel tests on CUDA: exit $? after ${SECONDS}s"; tail -n 4 "$out/kernel_tests.log"
    bench batch32_eager 150 --modes eager --reps 5 --warmup 2 --variants "sla triton" "sla flex"
    bench overhead_eager 60 --models minilm --batch 1 --seqs 16 32 --modes eager --reps 9 --warmup 2 \
      --variants "sla triton" "sla exact (2x SDPA)"
    ;;
  compiled)
    bench overhead_compiled 150 --models minilm --batch 1 --seqs 16 --modes compiled reduce-overhead --reps 9 \
      --warmup 3 --variants "sla triton"
    bench batch32_compiled 130 --models minilm --seqs 128 --modes compiled reduce-overhead --reps 5 --warmup 3 \
      --variants "sla triton"
    ;;
  step)   # 90 + 150 + 100 + 130 s at most
    timeout 90 "$PY" -m pytest -q -p no:cacheprovider -o addopts="--import-mode=importlib" -rs \
      tests/attention/test_opcheck.py tests/attention/test_compile_steps.py >"$out/step_tests.log" 2>&1
    echo "== opcheck and capture tests on CUDA: exit $? after ${SECONDS}s"; tail -n 4 "$out/step_tests.log"
    timeout 150 "$PY" benchmarks/compile.py --device cuda --model minilm --batch 32 --seq 128 --reps 9 \
      --out "$out/compile_gpu.md" --json "$out/compile_gpu.json" >"$out/compile_gpu.log" 2>&1
    echo "== compile_gpu: exit $? after ${SECONDS}s"
    bench step_eager 100 --modes eager --reps 5 --warmup 2 --variants "sla triton"
    bench step_captured 130 --seqs 128 512 --modes reduce-overhead --reps 5 --warmup 3 --variants "sla triton"
    ;;
  graphs)
    bench overhead_graphs 220 --models minilm --batch 1 --seqs 16 --modes reduce-overhead --reps 9 --warmup 3 \
      --variants "sla triton" --workloads train0 infer
    ;;
esac
