#!/usr/bin/env bash
# The reading runs on one CUDA GPU: the SQuAD reader (task squad2_plus11: SQuAD 1.1 train + the train part of the
# squad2 split, selected on the squad2 dev part), then baseline and SG-Net on RACE-M from that reader's encoder.
# Everything trains with bf16 autocast (`structattn train ... --precision bf16`, float32 master weights) and
# records its lines with experiments/record.py reading, which predicts the test splits with the kept model.
#
# Needs: this checkout installed (`make test` makes .venv; or PY=python with the package importable), the data in
# $STRUCTATTN_DATA (squad11, squad2, race), and all-MiniLM-L6-v2 (the default encoder). spaCy is needed only to build
# the feature cache: on a machine without it, run `cache` where spaCy is installed and copy $STRUCTATTN_CACHE over;
# every SG-Net feature is then read from the cache.
#
#   bash experiments/run_reading_gpu.sh cache                 # spaCy word spans and parses of every text, once
#   bash experiments/run_reading_gpu.sh reader RUN SEED [train flags...]   # e.g. reader base-s1-gpu 1
#   bash experiments/run_reading_gpu.sh race SEED [READER]   # READER: a reader's best/ (default runs/reading/base-s1-gpu/best)
#
# Measured (the lines of results/squad2.jsonl, squad11.jsonl and race.jsonl; each line's note has its command):
# the reader, 2 epochs, trained in about 5 minutes on one NVIDIA H100 (torch 2.11.0+cu130) after about 1.5 minutes
# of building features in 16 processes; RACE-M, 2 epochs from a reader's encoder: about a minute of features and
# 108 s of training for the baseline on one NVIDIA H200, SG-Net two to three times that per update.
# The committed RACE-M lines started from a reader whose weights were rounded to bfloat16 to be copied to the GPU
# machine, and ran under a wall-clock limit (TRAIN_SECONDS; record.py reading --stopped-log reads such a run's
# log): their notes say so. This recipe copies nothing and rounds nothing: the reader trained here is used as saved.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export PYTHONUNBUFFERED=1
RACE_FLAGS=${RACE_FLAGS:-"--task race_m --model-parts encoder --pool option --max-length 384 --batch-size 16
    --eval-batch-size 512 --learning-rate 5e-5 --warmup-ratio 0.1 --epochs 2 --eval-every 300 --precision bf16"}

cache() {   # the features' spaCy work, into $STRUCTATTN_CACHE (a second run reads it and parses nothing)
  $PY - <<'PY'
from transformers import AutoTokenizer
from structattn.settings import default_encoder
from structattn.tasks.multiple_choice import get_mc_task
from structattn.tasks.squad import get_qa_task
from structattn.tasks.text_words import words_with_offsets_many
from structattn.sgnet.multiple_choice_features import build_mc_features
from structattn.sgnet.loading import sg_structure_spec
for task, split in [("squad2_plus11", "train"), ("squad2", "dev"), ("squad2", "test"), ("squad11", "dev")]:
    qs = get_qa_task(task).read(split).questions
    words_with_offsets_many(list(dict.fromkeys([q.context for q in qs] + [q.question for q in qs])))
    print(f"{task}/{split}: {len(qs):,} questions cached", flush=True)
tokenizer = AutoTokenizer.from_pretrained(default_encoder())   # the readers keep all-MiniLM-L6-v2's tokenizer
for split in ["dev", "test", "train"]:
    questions = get_mc_task("race_m").read(split)
    build_mc_features(questions, tokenizer, sg_structure_spec("multiple_choice", "option"), max_length=384,
                      split=f"race_m/{split}")
    print(f"race_m/{split}: {len(questions):,} questions cached", flush=True)
PY
}

trained() {   # DIR [train flags...]: train into DIR, its log in DIR.log (resumable: the same command goes on from
              # the last checkpoint; TRAIN_SECONDS, when set, stops it after that many seconds, 0 = no limit)
  local dir=$1; shift
  mkdir -p "$dir"
  timeout "${TRAIN_SECONDS:-0}" $PY -m structattn.cli train "$@" --output-dir "$dir" 2>&1 | tee -a "$dir.log" \
    || { echo "$dir: training stopped before its end; the same command goes on from its last checkpoint" >&2; exit 1; }
}

reader() {   # RUN SEED [flags]: the squad2_plus11 reader, recorded on squad2 (test part) and squad11 (dev set)
  local run=$1 seed=$2 dir="runs/reading/$1"; shift 2
  trained "$dir" --task squad2_plus11 --precision bf16 --seed "$seed" --batch-size 32 \
    --eval-batch-size 256 --epochs 2 --eval-every 1000 "$@"
  $PY experiments/record.py reading "$dir" "squad2-$run" --task squad2
  $PY experiments/record.py reading "$dir" "squad11-$run" --task squad11
}

race() {   # SEED [READER]: baseline and SG-Net on RACE-M from READER's encoder (RACE_VARIANTS="baseline" alone)
  local seed=${1:-1} reader=${2:-runs/reading/base-s1-gpu/best} variant sgnet name
  [ -f "$reader/model.safetensors" ] || { echo "no reader at $reader: train one with 'reader', or name its best/" >&2; exit 2; }
  for variant in ${RACE_VARIANTS:-baseline sgnet}; do
    case $variant in baseline) sgnet=none ;; sgnet) sgnet=dual ;;
      *) echo "RACE_VARIANTS: unknown variant '$variant' (baseline, sgnet)" >&2; exit 2 ;; esac
    name="race_m-$variant-s$seed"
    # shellcheck disable=SC2086
    trained "runs/reading/$name" $RACE_FLAGS --model "$reader" --sgnet "$sgnet" --seed "$seed"
    $PY experiments/record.py reading "runs/reading/$name" "$name"   # the reader: its folder's name
  done
}

"$@"
