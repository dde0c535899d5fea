#!/usr/bin/env bash
# The translation runs committed in results/nmt.jsonl (+ results/nmt/<run>.<split>.de): Multi30k
# En->De, the tiny configuration (4+4 layers, d 128, FFN 256, 4 heads, dropout 0.3), 2-core CPU, torch 2.13, two
# lanes side by side with one thread each. A run whose line is already recorded is skipped; an interrupted run
# resumes from its checkpoint (same --output-dir).
#
# The text-only Transformer-tiny recipe of the Multi30k literature (lr 0.005, 2,000 warm-up updates, batches of
# 4,096 tokens, dropout 0.3, label smoothing 0.1, shared embeddings) at half its 8,000 updates (the CPU budget: about
# 1.4 s per update on one thread): joint BPE of 8,000, batches of <= 4,096 padded tokens per side, Adam (0.9, 0.98,
# 1e-9) at 5e-3 with 2,000 warm-up updates then inverse square root, at most 4,000 updates (about 27 epochs), dev
# BLEU (greedy) every 500 updates, early stopping after 4 evaluations without a better one, final model = the better on dev BLEU (beam 5) of the best checkpoint and the average of the last 5,
# beam 5 and length penalty 1.0 on the test sets. Mechanisms in the lowest 2 encoder layers, window m = 1 (k).
#   bash experiments/run_nmt_experiments.sh lane-a | lane-b | extra | window | layers | one NAME FLAGS...
set -uo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
BIN=${BIN:-.venv/bin}
. experiments/recipe.sh
NMT="--preset full --max-updates 4000 --warmup-steps 2000 --learning-rate 5e-3 --eval-every 500 --patience 4 --average-last 5
     --max-tokens 4096 --beam 5 --length-penalty 1.0 --threads 1 --no-progress"

run() {  # run NAME FLAGS...
  local name=$1; shift
  recorded results/nmt.jsonl "$name" && return
  trained runs/nmt/$name.log "$name" $BIN/structattn train-translation $NMT "$@" --output-dir runs/nmt/$name || return
  # dev hypotheses of the final model (Figure 2's dev BLEU is re-scored from them), same decoding as the tests
  $BIN/structattn translate --model runs/nmt/$name/final --beam 5 --length-penalty 1.0 \
    --input "$DEV_SOURCE" --output runs/nmt/$name/hypotheses/dev.de \
    >> runs/nmt/$name.log 2>&1 || echo "DEV TRANSLATION FAILED $name"
  $BIN/python experiments/record.py nmt runs/nmt/$name $name \
    >> runs/nmt/$name.log 2>&1 || echo "RECORD FAILED $name"
  case $name in  # Figures 2-4: gate statistics of the gated runs on the dev sources
    *hybrid_gate*|*sla*) $BIN/python -m structattn.translation.gates runs/nmt/$name/final --split dev \
      --out results/nmt_gates/$name.json >> runs/nmt/$name.log 2>&1 || echo "GATES FAILED $name" ;;
  esac
  case $name in  # Tables 3-4: probing of the paper's three models, seed 1
    multi30k-transformer-s1|multi30k-local-s1|multi30k-hybrid_gate-s1) $BIN/structattn probe \
      --model runs/nmt/$name/final --output results/probing/$name.json >> runs/nmt/$name.log 2>&1 \
      || echo "PROBE FAILED $name" ;;
  esac
}

lane() {  # lane SEED: the Table 1 variants with 2 seeds
  for v in transformer hybrid_gate local hybrid_concat yang; do run multi30k-$v-s$1 --variant $v --seed $1; done
}
extra() {  # one seed of the other Gaussians and our SLA extension
  for v in luong sperber sla; do run multi30k-$v-s1 --variant $v --seed 1; done
}
window() {  # Figure 2: window m = 2..5 (m = 1 is hybrid_gate seed 1)
  for m in 2 3 4 5; do run multi30k-hybrid_gate_m$m-s1 --variant hybrid_gate --k $m --seed 1; done
}
layers() {  # Figure 3: the gate in every encoder layer
  run multi30k-hybrid_gate_all-s1 --variant hybrid_gate --layers 4 --seed 1
}

mkdir -p runs/nmt
# the dev sources where the library finds its data (STRUCTATTN_DATA or ../shared/data)
DEV_SOURCE=$($BIN/python -c "from structattn.tasks.multi30k import split_paths; print(split_paths('dev')[0])")
case "${1:-}" in
  lane-a) lane 1 ;;
  lane-b) lane 2 ;;
  extra) extra ;;
  window) window ;;
  layers) layers ;;
  control) $BIN/structattn probe --model runs/nmt/multi30k-transformer-s1/final --untrained \
    --output results/probing/untrained-multi30k-transformer-s1.json ;;  # probing control: the same model untrained
  one) shift; run "$@" ;;  # one NAME FLAGS...: a single run, e.g. one multi30k-hybrid_gate-s1 --variant hybrid_gate --seed 1
  *) echo "usage: $0 lane-a | lane-b | extra | window | layers | control | one NAME FLAGS..."; exit 2 ;;
esac
