#!/usr/bin/env bash
# Build the trained models that load by name (structattn.models.trained) into src/structattn/trained/:
# train each with the settings of its results file, then experiments/ship_model.py saves it into the package, parses /
# translates its test set with the shipped weights and writes its card (a reader: packs it and measures its F1 cost
# against the float32 run on the same questions). `make models` runs `parsers` (the parsers
# are committed: rerunning rebuilds them); `make models-nmt` runs `nmt` (committed too: about 2 h on one
# CPU thread). A finished run in runs/ is not trained again (train-parsing / train-translation resume), only shipped.
#   bash experiments/make_models.sh parsers | parser-ft | nmt | reader | all
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
BIN=${BIN:-.venv/bin}
# The shipped reader was trained in float32 (runs reader-fp32-s1 and squad2-fp32enc-sgnet-s1): its recipe is this
# script's default; PRECISION=bf16 READER_RUN=reader-cpu builds the bf16 CPU reader's instead (a CPU with avx512_bf16).
export PRECISION=${PRECISION:-fp32} READER_RUN=${READER_RUN:-reader-fp32}
. experiments/recipe.sh   # READER_ENC from READER_RUN (reader-fp32 -> fp32enc)

# experiments/recipes/parsing.toml's CPU configuration; POS tags from spaCy (the best BNA rows of PARSING.md)
PARSING="--preset full --d-model 128 --heads 4 --d-head 32 --d-ff 256 --label-hidden 128 --epochs 12 --patience 4 --max-chart-cells 0 --no-progress"  # one pass per batch, as recorded
# experiments/recipes/nmt.toml's recipe
NMT="--preset full --max-steps 4000 --warmup-steps 2000 --learning-rate 5e-3 --eval-every 500 --patience 4 --average-last 5
     --max-tokens 4096 --beam 5 --length-penalty 1.0 --threads 1 --no-progress"

train() {  # train RUN_DIR COMMAND FLAGS...: record the commit, train (or resume / finish) with its log beside it
  local dir=$1; shift
  mkdir -p "$(dirname "$dir")"
  mkdir -p "$dir"
  [ -f "$dir/started_at_commit.txt" ] || \
    echo "$(git rev-parse HEAD)$([ -z "$(git status --porcelain --untracked-files=no)" ] || echo -dirty)" \
      > "$dir/started_at_commit.txt"
  echo "== $dir: structattn $*"
  $BIN/structattn "$@" --output-dir "$dir" > "$dir.log" 2>&1 || { echo "FAILED $dir (see $dir.log)"; return 1; }
}

parsers() {
  # PARSING.md: BiMSA + NSA + POS on frozen MiniLM (the best full-BNA row, 83.21) and without an encoder (81.80)
  train runs/parsing/plm-bna-posspacy-s1 train-parsing $PARSING --fine-tune-encoder false --mechanism bna \
    --pos spacy --seed 1
  $BIN/python experiments/ship_model.py runs/parsing/plm-bna-posspacy-s1 bna-minilm
  train runs/parsing/none-bna-posspacy-s1 train-parsing $PARSING --model none --mechanism bna --pos spacy --seed 1
  $BIN/python experiments/ship_model.py runs/parsing/none-bna-posspacy-s1 bna-scratch
}

parser_ft() {
  # results/PEERS.md: BNA on all-MiniLM-L6-v2 fine-tuned, to convergence (the peers' recipe, seed 2), packed int8
  PEERS=${PEERS:-/work/peers} bash experiments/run_peers.sh bna-minilm-ft bna 2
  $BIN/python experiments/ship_model.py "${PEERS:-/work/peers}/bna-run/minilm-ft-bna-s2" bna-minilm-ft
}

nmt() {
  # NMT.md: + HYBRID (Gate), seed 1 (the run the gate figures and probing of NMT.md use)
  train runs/nmt/multi30k-hybrid_gate-s1 train-translation $NMT --mechanism hybrid_gate --seed 1
  $BIN/python experiments/ship_model.py runs/nmt/multi30k-hybrid_gate-s1 hybrid-gate-en-de
}

reader() {
  # docs/reader.md: the CPU reader (experiments/run_reading_experiments.sh reader-cpu), SG-Net (dual) on its encoder:
  # the seed-1 SG-Net run of the comparison there (squad-encoder-b; results/squad2.jsonl squad2-$READER_ENC-sgnet-s1), then
  # experiments/ship_model.py packs it (int8 per row), answers the squad2 test part and SQuAD 1.1 dev with it and the
  # float32 run, and writes its card. PRECISION, READER_RUN and READER_ENC (the runs on that reader's encoder) as in
  # experiments/recipe.sh; here float32 and reader-fp32 unless set (above).
  BIN=$BIN bash experiments/run_reading_experiments.sh reader-cpu 1
  READER=runs/reading/$READER_RUN-s1/best ENC=$READER_ENC BIN=$BIN bash experiments/run_reading_experiments.sh squad-encoder-b 1
  $BIN/python experiments/ship_model.py runs/reading/squad2-$READER_ENC-sgnet-s1 sgnet-squad2
}

case "${1:-parsers}" in
  parsers) parsers ;;
  parser-ft) parser_ft ;;
  nmt) nmt ;;
  reader) reader ;;
  all) parsers; nmt ;;
  *) echo "usage: $0 parsers | parser-ft | nmt | reader | all"; exit 2 ;;
esac
du -ch src/structattn/trained/*/model.safetensors | tail -1
