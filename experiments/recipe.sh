# The steps the bash reading recipe repeats (sourced by experiments/run_reading_experiments.sh): a run
# already recorded in its results file is skipped, so a recipe started again goes on where it stopped; a training
# command runs with its output in the run's log, and a failure is said without stopping the other runs.

recorded() {  # RESULTS_JSONL NAME: true, and says so, when the file has a line for run NAME
  grep -q "\"run\": \"$2\"" "$1" 2>/dev/null && echo "skip $2 (recorded)"
}

trained() {   # LOG NAME COMMAND...: COMMAND with its output in LOG; false, and says so, when it fails
  local log=$1 name=$2; shift 2
  echo "== $name: $*"
  "$@" > "$log" 2>&1 || { echo "FAILED $name ($log)"; return 1; }
}

# The precision of the CPU reading recipes: PRECISION=bf16 (the default; the committed CPU lines: bf16 autocast over
# float32 weights, on a CPU with avx512_bf16) or PRECISION=fp32. Where the CPU has no bfloat16 instructions bf16 is
# emulated: on a 2-core AMD EPYC with AVX2 only, one update of the reader (32 windows of 200 tokens, one thread) took
# 175-192 s in bf16 against 11 s in float32. Runs in float32 take run names of their own: READER_RUN names the CPU
# reader's run (runs/reading/READER_RUN-sSEED), READER_ENC the infix of the runs on its encoder (squad2-READER_ENC-*),
# derived from it: reader-cpu -> cpuenc, reader-fp32 -> fp32enc.
PRECISION=${PRECISION:-bf16}
READER_RUN=${READER_RUN:-reader-cpu}
READER_ENC=${READER_ENC:-${READER_RUN#reader-}enc}
