#!/usr/bin/env bash
# One short training run per trainer family in fp32 and in bf16 autocast, same seed and data: the time
# per update and the final score of each, recorded by `experiments/record.py precision` into
# results/precision_runs.jsonl and results/PRECISION.md (the table of the workloads recorded in both precisions). One CPU thread per run; the pairs run one after the other,
# fp32 then bf16 of the same workload, so both see about the same machine load. A finished run is not trained
# again (each trainer resumes or reports), so the script can be restarted after a kill.
#   bash experiments/run_precision_experiments.sh [sentence|qa|parsing|translation|all]
# The qa pair starts from the reader of experiments/run_reading_gpu.sh (READER, default runs/reading/base-s1-gpu/best),
# as the long reading runs of experiments/run_reading_experiments.sh do.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
BIN=${BIN:-.venv/bin}
OUT=${OUT:-runs/precision}
READER=${READER:-runs/reading/base-s1-gpu/best}

run() {  # run NAME COMMAND FLAGS...: train into $OUT/NAME with the log beside it and the command; record it
  local name=$1; shift
  mkdir -p "$OUT"
  echo "structattn $* --output-dir $OUT/$name" > "$OUT/$name.command"
  echo "== $name: structattn $*"
  $BIN/structattn "$@" --output-dir "$OUT/$name" > "$OUT/$name.log" 2>&1 || { echo "FAILED $name (see $OUT/$name.log)"; return 1; }
  $BIN/python experiments/record.py precision "$OUT/$name" "$name"
}

sentence() {  # MiniLM on 4,000 SST-2 sentences, two epochs (250 updates of 32), scored on all of dev
  for p in fp32 bf16; do
    run sentence-$p train --task sst2 --max-train-examples 4000 --epochs 2 --batch-size 32 --max-length 128 \
      --learning-rate 1e-4 --group-by-length true --seed 1 --no-progress --precision $p
  done
}

qa() {  # the long reading runs' recipe (reader's encoder, span head from scratch), 1,000 questions, 500 dev
  for p in fp32 bf16; do
    run qa-$p train --task squad2 --model "$READER" --model-parts encoder --max-train-examples 1000 \
      --max-eval-examples 500 --epochs 1 --max-length 256 --stride 128 --batch-size 16 --eval-batch-size 64 \
      --learning-rate 5e-5 --warmup-ratio 0.1 --group-by-length true --seed 1 --no-progress --precision $p
  done
}

parsing() {  # BNA on frozen MiniLM at experiments/run_parsing_experiments.sh's CPU size, 4 epochs
  for p in fp32 bf16; do
    run parsing-$p train-parsing --fine-tune-encoder false --variant bna --d-model 128 --heads 4 --d-head 32 \
      --d-ff 256 --label-hidden 128 --pos none --epochs 4 --patience 4 --seed 1 --no-progress --precision $p
  done
}

translation() {  # tiny transformer on Multi30k, 300 updates, test2016 only
  for p in fp32 bf16; do
    run translation-$p train-translation --variant transformer --max-updates 300 --warmup-steps 300 \
      --learning-rate 5e-3 --eval-every 150 --max-tokens 4096 --average-last 2 --test-splits test2016 \
      --threads 1 --seed 1 --no-progress --precision $p
  done
}

case "${1:-all}" in
  sentence) sentence ;;
  qa) qa ;;
  parsing) parsing ;;
  translation) translation ;;
  all) sentence; qa; parsing; translation ;;
  *) echo "usage: $0 sentence | qa | parsing | translation | all"; exit 2 ;;
esac
