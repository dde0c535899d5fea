#!/usr/bin/env bash
# The README's training commands with the laptop presets, timed end to end (data preparation, spaCy
# tagging, training, evaluation, test parse / translation): results/laptop_defaults.jsonl and results/laptop/.
#   THREADS=2 bash experiments/run_laptop_defaults.sh [parsing|translation|transformer|all]
# Each run starts in a fresh folder under runs/laptop/ (an earlier one is removed: a resumed run would not time
# the whole command). The load average before and after is recorded: on a shared machine the time is an upper
# bound for an idle one.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
SUFFIX=${SUFFIX:-}  # appended to each run's name (folder, recorded line, committed output), e.g. -1thread
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
BIN=${BIN:-.venv/bin}
mkdir -p runs/laptop results/laptop

timed() {  # timed NAME OUTPUT_FILE COMMAND...: run the README command in a fresh folder, then record it as NAME$SUFFIX
  local name=$1$SUFFIX output=$2; shift 2
  rm -rf "runs/laptop/$name"
  local load_before start end
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(date +%s.%N)
  echo "== $name: $*"
  "$@" > "runs/laptop/$name.log" 2>&1 || { echo "FAILED $name (see runs/laptop/$name.log)"; return 1; }
  end=$(date +%s.%N)
  $BIN/python experiments/record.py laptop "runs/laptop/$name" "$name" "$output" \
    --seconds "$(echo "$end - $start" | bc)" --threads "$THREADS" --load-before "$load_before" \
    --load-after "$(cut -d' ' -f1-3 /proc/loadavg)" --command "$*"
}

parsing() {
  timed bna test.trees $BIN/structattn train-parsing --variant bna --output-dir runs/laptop/bna$SUFFIX
}

translation() {
  timed hg hypotheses/test2016.de $BIN/structattn train-translation --variant hybrid_gate --seed 1 \
    --output-dir runs/laptop/hg$SUFFIX
}

transformer() {  # the plain transformer under the same preset: the baseline next to Joey NMT's cut run (PEERS.md)
  timed transformer hypotheses/test2016.de $BIN/structattn train-translation --variant transformer --seed 1 \
    --output-dir runs/laptop/transformer$SUFFIX
}

case "${1:-all}" in
  parsing) parsing ;;
  translation) translation ;;
  transformer) transformer ;;
  all) parsing; translation ;;
  *) echo "usage: $0 parsing | translation | transformer | all"; exit 2 ;;
esac
