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
