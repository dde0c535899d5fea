#!/usr/bin/env bash
# The constituency-parsing runs committed in results/parsing.jsonl and results/parsing/*.test.trees.
# 2-core CPU, torch 2.13, two lanes side by side with one thread each (about 95 minutes). A run whose line is already in
# parsing.jsonl is skipped; an interrupted run resumes from its checkpoint (same --output-dir).
#
# CPU configuration (not the paper's 512/1024 sizes, which would not train in hours on this CPU):
#   d_model 128, 4 heads of 32, feed-forward 256, label MLP 128, dropouts 0.2, batch 32, Adam 1e-3 with 200
#   warm-up steps, at most 12 epochs, early stopping after 4 epochs without dev-F1 gain.
#   "plm" = all-MiniLM-L6-v2 kept FROZEN (feature-based; fine-tuning it for every row would not fit the
#   CPU budget), first sub-word per word, 2 layers on top (the paper's depth with a pretrained encoder).
#   "none" = word embeddings + character BiLSTM, 4 layers (the paper uses 8).
#   POS "spacy" = tags from en_core_web_sm on the gold words; output trees carry the gold tags (evaluation).
set -uo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
BIN=.venv/bin
. experiments/recipe.sh
COMMON="--preset full --d-model 128 --heads 4 --d-head 32 --d-ff 256 --label-hidden 128 --epochs 12 --patience 4 --no-progress"
PLM="--fine-tune-encoder false"
NONE="--model none"

run() {  # run NAME FLAGS...
  local name=$1; shift
  recorded results/parsing.jsonl "$name" && return
  trained runs/parsing/$name.log "$name" $BIN/structattn train-parsing $COMMON "$@" --output-dir runs/parsing/$name \
    || return
  $BIN/python experiments/record.py parsing runs/parsing/$name $name
}

lane_plm() {
  for pos in none spacy; do
    for v in sa bimsa sa_nsa bna; do run plm-$v-pos$pos-s1 $PLM --variant $v --pos $pos --seed 1; done
  done
  for v in bna sa; do run plm-$v-posnone-s2 $PLM --variant $v --pos none --seed 2; done
  for n in 2 3 5; do run plm-bna-n$n-posnone-s1 $PLM --variant bna --ngram $n --pos none --seed 1; done
  run none-bna-nsa2-posnone-s1 $NONE --variant bna --nsa-layers 2 --pos none --seed 1  # Figure 3 (k = 1: the grid's bna)
}

lane_none() {
  for pos in none spacy; do
    for v in sa bimsa sa_nsa bna; do run none-$v-pos$pos-s1 $NONE --variant $v --pos $pos --seed 1; done
  done
  for v in bna sa; do run none-$v-posnone-s2 $NONE --variant $v --pos none --seed 2; done
  run none-bna-nsa4-posnone-s1 $NONE --variant bna --nsa-layers 4 --pos none --seed 1  # Figure 3: all 4 layers NSA
}

mkdir -p runs/parsing
case "${1:-both}" in
  plm) lane_plm ;;
  none) lane_none ;;
  both) lane_plm & lane_none & wait ;;
esac
