#!/usr/bin/env bash
# Peers on our data with their own code (results/PEERS.md): SuPar's CRF constituency parser and
# Joey NMT's Transformer. Everything the peers write (virtual environments, data files, models, logs) lives under
# $PEERS (default /work/peers), outside the repository; only the scores, predictions and timings are committed.
# One thread for every training and evaluation (OMP/MKL and the tools' own options); SUPAR_THREADS=N trains SuPar on
# N threads instead (same seed and settings; the time per epoch changes, sums may round differently in their last
# bits, and the summary records N).
#
#   bash experiments/run_peers.sh venvs            # the two virtual environments (python3.11, torch 2.13.0 CPU first)
#   bash experiments/run_peers.sh data             # SuPar's tree files and Joey's BPE files, written by OUR readers
#   bash experiments/run_peers.sh supar [EPOCHS]   # train (default 12 epochs: the CPU budget, as our BNA's), predict
#                                              #   test, score; run again to resume an interrupted training
#   bash experiments/run_peers.sh supar-converge SEED [PATIENCE]  # SuPar until dev F1 stops improving (default 5
#   bash experiments/run_peers.sh bna-converge SEED [PATIENCE]    #   epochs), and our BNA without a pretrained encoder
#   bash experiments/run_peers.sh supar-speed      # test parse sentences/s, SuPar vs BNA, 1 thread, one after the other
#                                              #   (trains a 1-epoch BNA model for it first if none is there)
#   bash experiments/run_peers.sh joeynmt-smoke    # 100 updates of Joey and of ours (transformer, hybrid_gate) at once
#   bash experiments/run_peers.sh joeynmt          # the full Joey run (4,000 updates; hours on 1 CPU thread),
#                                              #   resumed from its latest checkpoint when run again
#   bash experiments/run_peers.sh joeynmt-test     # Joey's test hypotheses (beam 5; the four Multi30k test sets)
#                                              #   -> text -> our BLEU
#   bash experiments/run_peers.sh joeynmt-laptop   # Joey cut to 800 updates, all warm-up (our laptop preset then), then
#                                              #   its test2016 BLEU (results/peers/joeynmt-laptop.test2016.de)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PEERS=${PEERS:-/work/peers}
PY=${PY:-$REPO/.venv/bin/python}            # our library (or: PY=/work/main/.venv/bin/python with PYTHONPATH=src)
export PYTHONPATH=$REPO/src${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
SUPAR=$PEERS/supar-venv/bin
JOEY=$PEERS/joey-venv/bin
# SuPar 1.1.4 pickles objects into its model files; torch >= 2.6 refuses them by default (weights_only=True).
# torch's switch restores the old default, for SuPar's commands only (and only on files written here)
SUPAR_PY="env TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 $SUPAR/python"
raw_dir() {  # the Multi30k raw folder where the library finds its data (STRUCTATTN_DATA or ../shared/data)
  $PY -c "from structattn.tasks.multi30k import split_paths; print(split_paths('train')[0].parent)"
}

venvs() {
  mkdir -p "$PEERS" && echo "torch==2.13.0" > "$PEERS/constraints.txt"
  python3.11 -m venv "$PEERS/supar-venv" && "$SUPAR/pip" install torch==2.13.0 \
    && "$SUPAR/pip" install -c "$PEERS/constraints.txt" supar==1.1.4
  python3.11 -m venv "$PEERS/joey-venv" && "$JOEY/pip" install torch==2.13.0 \
    && "$JOEY/pip" install -c "$PEERS/constraints.txt" joeynmt==2.3.0 importlib_metadata  # joeynmt imports it, does not declare it
}

data() {
  $PY experiments/peers/prepare_peer_data.py ptb "$PEERS/data"
  $PY experiments/peers/prepare_peer_data.py multi30k "$PEERS/data/multi30k"
}

supar_train() {  # supar_train RUN SEED EPOCHS PATIENCE OUT: SuPar's own training command; an interrupted run resumes
  # (--checkpoint) from its last checkpoint (SuPar writes one at every dev improvement; a finished run leaves only the
  # best model, not resumable), then the test parse (copied to OUT, committed) and its EVALB
  local run=$1 seed=$2 epochs=$3 patience=$4 out=$5 resume="" threads=${SUPAR_THREADS:-1}
  [ -f "$run/model" ] && resume=--checkpoint
  mkdir -p "$run"
  /usr/bin/time -v $SUPAR_PY -m supar.cmds.crf_con --mbr -d=-1 -t "$threads" -s "$seed" -c experiments/peers/supar_crf_con.ini \
    -p "$run/model" train ${resume:--b} -f char --embed= --train "$PEERS/data/ptb.train.trees" --dev "$PEERS/data/ptb.dev.trees" \
    --test "$PEERS/data/ptb.test.trees" --epochs="$epochs" --patience="$patience" >> "$run/train.out" 2>&1 || { echo "SuPar training failed: $run/train.out"; return 1; }
  supar_predict "$run" "$out"
}

supar_predict() {  # supar_predict [RUN [OUT]]
  local run=${1:-$PEERS/supar-run/crf-char} out=${2:-results/peers/supar.test.txt}
  $SUPAR_PY -m supar.cmds.crf_con --mbr -d=-1 -t 1 -p "$run/model" predict --data "$PEERS/data/ptb.test.trees" \
    --pred "$run/test.pred" > "$run/predict.out" 2>&1 || { echo "SuPar prediction failed: $run/predict.out"; return 1; }
  cp "$run/test.pred" "$out"
  $PY -m structattn.cli score evalb --gold "$PEERS/data/ptb.test.gold" --predictions "$out" | tee "$run/test.evalb"
}

supar() {  # supar [EPOCHS]: the 12-epoch budget run (seed 1, patience 100 = never stops early)
  supar_train "$PEERS/supar-run/crf-char" 1 "${1:-12}" 100 results/peers/supar.test.txt
}

# Until dev F1 stops improving: both parsers evaluate dev once an epoch and stop after PATIENCE epochs without a
# better dev F1 (default 5), at most 1,000 epochs; two seeds each (SEED 1 and 2); committed test parses
# results/peers/{supar,bna}-converged-sSEED.test.*; compared by experiments/peers/supar_vs_bna.py --converged.
supar_converge() {  # supar-converge SEED [PATIENCE]
  local seed=${1:?seed} patience=${2:-5}
  supar_train "$PEERS/supar-run/crf-char-converge-s$seed" "$seed" 1000 "$patience" "results/peers/supar-converged-s$seed.test.txt"
}

bna_converge() {  # bna-converge SEED [PATIENCE]: experiments/recipes/parsing.toml's none-bna-posnone settings (no
  # pretrained encoder, no POS tags), resumed by the same command after an interruption
  local seed=${1:?seed} patience=${2:-5} run=$PEERS/bna-run/none-bna-posnone-converge-s${1:-1}
  mkdir -p "$PEERS/bna-run"
  /usr/bin/time -v $PY -m structattn.cli train-parsing --preset full --d-model 128 --heads 4 --d-head 32 --d-ff 256 \
    --label-hidden 128 --epochs 1000 --patience "$patience" --no-progress --model none --variant bna --pos none \
    --seed "$seed" --output-dir "$run" >> "$run.log" 2>&1 || { echo "BNA training failed: $run.log"; return 1; }
  cp "$run/test.trees" "results/peers/bna-converged-s$seed.test.trees"
  $PY -m structattn.cli score evalb --gold "$PEERS/data/ptb.test.gold" --predictions "results/peers/bna-converged-s$seed.test.trees" | tee "$run.evalb"
}

bna_model() {  # a BNA parser for the speed comparison only: experiments/recipes/parsing.toml's none-bna-posnone-s1
  # settings, 1 epoch (parse time does not depend on the weights: the CKY chart over all spans is always full)
  mkdir -p "$PEERS/bna-run"
  $PY -m structattn.cli train-parsing --preset full --d-model 128 --heads 4 --d-head 32 --d-ff 256 --label-hidden 128 --epochs 1 \
    --patience 4 --no-progress --model none --variant bna --pos none --seed 1 \
    --output-dir "$PEERS/bna-run/none-bna-posnone-s1-e1" > "$PEERS/bna-run/none-bna-posnone-s1-e1.log" 2>&1
}

supar_speed() {  # both parsers on the 518 test sentences, 1 thread, alternating, 3 rounds
  [ -d "$PEERS/bna-run/none-bna-posnone-s1-e1/best" ] || bna_model
  $PY experiments/peers/parse_speed.py --peers "$PEERS" --bna "$PEERS/bna-run/none-bna-posnone-s1-e1/best" --rounds 3 \
    | tee "$PEERS/supar-run/speed.out"
}

joey_config() {  # joey_config OUT [sed expressions...]: the committed config with $PEERS filled in
  local out=$1; shift
  sed -e "s#\$PEERS#$PEERS#g" "$@" experiments/peers/joeynmt_multi30k.yaml > "$out"
}

joeynmt_smoke() {
  local RAW; RAW=$(raw_dir)
  joey_config "$PEERS/joey-smoke.yaml" -e 's#joey-run/multi30k#joey-run/smoke#' -e 's#^    updates: 4000#    updates: 100#' \
    -e 's#validation_freq: 500#validation_freq: 100#' -e 's#bpe/dev"#bpe/dev20"#'
  head -20 "$PEERS/data/multi30k/bpe/dev.en" > "$PEERS/data/multi30k/bpe/dev20.en"
  head -20 "$PEERS/data/multi30k/bpe/dev.de" > "$PEERS/data/multi30k/bpe/dev20.de"
  head -20 "$RAW/val.en" > "$PEERS/data/multi30k/dev20.en"; head -20 "$RAW/val.de" > "$PEERS/data/multi30k/dev20.de"
  mkdir -p "$PEERS/joey-run" "$PEERS/ours-run"
  rm -rf "$PEERS/joey-run/smoke" "$PEERS/ours-run/transformer" "$PEERS/ours-run/hybrid_gate"
  "$JOEY/python" -m joeynmt train -t "$PEERS/joey-smoke.yaml" > "$PEERS/joey-run/smoke.out" 2>&1 &
  local pids=$!
  for v in transformer hybrid_gate; do  # ours: 100 updates, same data/BPE/batches; a 20-line dev set keeps decoding short
    $PY -m structattn.cli train-translation --preset full --mechanism $v --seed 1 --train-source "$RAW/train.en" --train-target "$RAW/train.de" \
      --dev-source "$PEERS/data/multi30k/dev20.en" --dev-target "$PEERS/data/multi30k/dev20.de" --max-updates 100 \
      --warmup-steps 2000 --learning-rate 5e-3 --eval-every 100 --patience 4 --average-last 1 --max-tokens 4096 --beam 1 \
      --threads 1 --no-progress --output-dir "$PEERS/ours-run/$v" > "$PEERS/ours-run/$v.out" 2>&1 &
    pids=$pids,$!
  done
  $PY experiments/peers/cpu_monitor.py "$PEERS/smoke-cpu.jsonl" ${pids//,/ } &
  wait
  $PY experiments/peers/nmt_throughput.py "$PEERS/joey-run/smoke/train.log" "$PEERS"/ours-run/{transformer,hybrid_gate} \
    --cpu "$PEERS/smoke-cpu.jsonl" --pids "$pids" | tee "$PEERS/smoke-throughput.jsonl"
}

joey_resumes() {  # how many times the full run was resumed: its folders multi30k-resume1 .. multi30k-resumeN
  local n=0
  while [ -d "$PEERS/joey-run/multi30k-resume$((n + 1))" ]; do n=$((n + 1)); done
  echo $n
}

joey_last_dir() {  # the full run's newest model folder: joey-run/multi30k or its last multi30k-resumeN
  local n; n=$(joey_resumes)
  if [ "$n" -gt 0 ]; then echo "$PEERS/joey-run/multi30k-resume$n"; else echo "$PEERS/joey-run/multi30k"; fi
}

joeynmt() {  # the full run; a second call resumes from the latest checkpoint into joey-run/multi30k-resumeN
  local dir=$PEERS/joey-run/multi30k cfg=$PEERS/joey-multi30k.yaml
  mkdir -p "$PEERS/joey-run"
  if [ -e "$dir/latest.ckpt" ]; then
    local last n; last=$(joey_last_dir); n=$(( $(joey_resumes) + 1 ))
    joey_config "$cfg" -e "s#joey-run/multi30k\"#joey-run/multi30k-resume$n\"#" \
      -e "s#^training:#training:\n    load_model: \"$last/latest.ckpt\"#"
    dir=$dir-resume$n
  else
    joey_config "$cfg"
  fi
  "$JOEY/python" -m joeynmt train -t "$cfg" > "$dir.out" 2>&1 || { echo "Joey NMT training failed: $dir.out"; return 1; }
  echo "trained: $dir"
}

joeynmt_laptop() {  # the recipe cut as our laptop preset then was: 800 updates, all warm-up, dev every 200
  local dir=$PEERS/joey-run/laptop cfg=$PEERS/joey-laptop.yaml
  mkdir -p "$PEERS/joey-run"
  rm -rf "$dir"
  joey_config "$cfg" -e 's#joey-run/multi30k"#joey-run/laptop"#' -e 's#^    updates: 4000#    updates: 800#' \
    -e 's#learning_rate_warmup: 2000#learning_rate_warmup: 800#' -e 's#validation_freq: 500#validation_freq: 200#'
  "$JOEY/python" -m joeynmt train -t "$cfg" > "$dir.out" 2>&1 || { echo "Joey NMT training failed: $dir.out"; return 1; }
  joeynmt_test "$dir" joeynmt-laptop test2016
}

joeynmt_test() {  # joeynmt_test [MODEL_DIR [NAME [SPLIT ...]]]: each split (default: the four Multi30k test sets)
  # translated with the best checkpoint, beam 5, alpha 1.0 (Joey's `test` reads its config's data.test, so one config
  # copy per split), its pieces turned into text by our tokenizer, scored by `structattn score bleu`
  local dir=${1:-$(joey_last_dir)} name=${2:-joeynmt}
  shift $(( $# < 2 ? $# : 2 ))
  local splits=("$@") split
  [ ${#splits[@]} -eq 0 ] && splits=(test2016 test2017 test2018 mscoco2017)
  for split in "${splits[@]}"; do
    sed -e "s#bpe/test2016\"#bpe/$split\"#" "$dir/config.yaml" > "$dir/config-$split.yaml"
    "$JOEY/python" -m joeynmt test "$dir/config-$split.yaml" --output-path "$dir/hyp-$split" > "$dir/test-$split.out" 2>&1 \
      || { echo "Joey NMT test failed: $dir/test-$split.out"; return 1; }
    $PY experiments/peers/prepare_peer_data.py detok "$PEERS/data/multi30k" "$dir/hyp-$split.test" results/peers/$name.$split.de
    $PY -m structattn.cli score bleu --split "$split" --predictions results/peers/$name.$split.de
  done
}

case "${1:-}" in
  venvs) venvs ;;
  data) data ;;
  supar) shift; supar "$@" ;;
  supar-predict) supar_predict ;;
  supar-converge) shift; supar_converge "$@" ;;
  bna-converge) shift; bna_converge "$@" ;;
  supar-speed) supar_speed ;;
  joeynmt-smoke) joeynmt_smoke ;;
  joeynmt) joeynmt ;;
  joeynmt-test) shift; joeynmt_test "$@" ;;
  joeynmt-laptop) joeynmt_laptop ;;
  *) echo "usage: $0 venvs | data | supar [EPOCHS] | supar-predict | supar-converge SEED [PATIENCE] | bna-converge SEED [PATIENCE] | supar-speed | joeynmt-smoke | joeynmt | joeynmt-test [DIR [NAME [SPLIT ...]]] | joeynmt-laptop"; exit 2 ;;
esac
