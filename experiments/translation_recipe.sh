#!/usr/bin/env bash
# Why our translation recipe learns more slowly than Joey NMT's at the laptop budget: one run per difference
# between the two recipes, each from our laptop preset (800 updates, all warm-up, dev BLEU every 200), the
# transformer variant, seed 1, one thread. Results: results/peers/nmt_recipe_ablation.jsonl and the committed
# test translations in results/peers/ablation/ (recorded by experiments/record.py nmt).
#   bash experiments/translation_recipe.sh NAME [SEED] [VARIANT]    NAME: one of the keys of FLAGS below, or "list"
# A run resumes from its checkpoint when started again; a finished run is only recorded again.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
THREADS=${THREADS:-1}
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS

declare -A FLAGS=(
  [ours]=""                                                          # our laptop recipe as committed
  [adam-eps]="--adam-eps 1e-8"                                       # Joey: torch's Adam epsilon
  [init]="--init xavier_normal"                                      # Joey: Xavier-normal matrices and embeddings
  [batching]="--batching shuffled"                                   # Joey: batches from shuffled, unsorted pairs
  [dropout]="--embedding-dropout 0 --attention-dropout 0.3 --activation-dropout 0.3"  # Joey's dropout placement
  [joey]="--adam-eps 1e-8 --init xavier_normal --batching shuffled --embedding-dropout 0 --attention-dropout 0.3 --activation-dropout 0.3"
)

name=${1:?usage: $0 NAME [SEED] [VARIANT]; NAME: ${!FLAGS[*]}}
[[ $name == list ]] && { for k in "${!FLAGS[@]}"; do echo "$k: ${FLAGS[$k]}"; done; exit 0; }
[[ -v FLAGS[$name] ]] || { echo "unknown ablation '$name'; valid: ${!FLAGS[*]}" >&2; exit 2; }
seed=${2:-1}
variant=${3:-transformer}
run="$name-$variant-s$seed"
out="runs/recipe/$run"
mkdir -p runs/recipe
# shellcheck disable=SC2086  # the flags are words
cmd=("$BIN/structattn" train-translation --variant "$variant" --seed "$seed" --threads "$THREADS" --no-progress
     --output-dir "$out" ${FLAGS[$name]})
echo "== $run: ${cmd[*]}"
"${cmd[@]}" > "runs/recipe/$run.log" 2>&1 || { echo "FAILED $run (see runs/recipe/$run.log)"; exit 1; }
"$BIN/python" experiments/record.py nmt "$out" "$run" --results results/peers/nmt_recipe_ablation.jsonl \
  --outputs results/peers/ablation --note "recipe ablation '$name': ${FLAGS[$name]:-our laptop recipe}"
