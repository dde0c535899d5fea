#!/usr/bin/env bash
# The paper-shape parser ablation (results/PEERS.md: SA, BiMSA, SA+NSA and BNA without a pretrained encoder, 8
# layers, character BiLSTM, batch 250, learning rate 8e-4, two seeds each) on one GPU of a machine that has torch but
# no network and no copy of the data: all eight runs at once, one process each (`run_peers.sh paper-parallel`).
#
#   bash experiments/gpu_paper_ablation.sh pack    # here: the treebank sample into .gpucarry/, conllu's wheel into
#                                                  #   .whl/ (the one package train-parsing imports that such an image
#                                                  #   lacks); both folders are ignored by git
#   bash experiments/gpu_paper_ablation.sh run     # there, from the repository root with .gpucarry and .whl beside it:
#                                                  #   trains, parses the test split, scores; $OUT/paper-dWIDTH.tar.gz
#                                                  #   holds the test parses, logs and summaries
#   bash experiments/gpu_paper_ablation.sh unpack FILE  # here: the archive's parses into results/peers/, its run
#                                                  #   folders into $PEERS/bna-run/ (converged_summary.py reads them)
#
# PAPER_WIDTH (default 512, the paper's: 16.7M parameters with BNA), SEEDS (default "1 2"), RUN_SECONDS (default 0 = no
# limit: each run stops itself when dev F1 has not improved for 5 epochs; a run stopped by the limit keeps its
# checkpoint under runs/peers/ and goes on when `run` is given again on the same machine), DEVICE (default cuda; cpu
# with OURS_EXTRA="--max-train-examples 16 --max-eval-examples 8 --epochs 1" tries the logic on a CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
export PAPER_WIDTH=${PAPER_WIDTH:-512} DEVICE=${DEVICE:-cuda}
PEERS=${PEERS:-runs/peers}

pack() {
  mkdir -p .gpucarry/data .whl
  rm -rf .gpucarry/data/ptb_sample_nltk && cp -r ../shared/data/ptb_sample_nltk .gpucarry/data/
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl "conllu>=6.0"
  du -sh .gpucarry .whl
}

run() {
  local out=${OUT:-runs/gpu-out} archive
  mkdir -p "$out" "$PEERS"
  if ! python3 -c "import conllu" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/conllu-*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  export STRUCTATTN_DATA=${STRUCTATTN_DATA:-$PWD/.gpucarry/data} PY=${PY:-python3} PEERS PYTHONUNBUFFERED=1
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  $PY experiments/peers/prepare_peer_data.py ptb "$PEERS/data"
  local status=0 start=$SECONDS
  # shellcheck disable=SC2086  # SEEDS: words
  bash experiments/run_peers.sh paper-parallel ${SEEDS:-1 2} || status=$?
  echo "paper-parallel: $((SECONDS - start)) s wall"
  archive="$out/paper-d$PAPER_WIDTH.tar.gz"
  # the test parses, each run's log and its summary / settings (checkpoints and models stay behind: too large)
  tar czf "$archive" results/peers/paper-d"$PAPER_WIDTH"-*.test.trees "$PEERS"/bna-run/paper-d"$PAPER_WIDTH"-*.log \
    "$PEERS"/bna-run/paper-d"$PAPER_WIDTH"-*.evalb "$PEERS"/bna-run/paper-d"$PAPER_WIDTH"-*/summary.json \
    "$PEERS"/bna-run/paper-d"$PAPER_WIDTH"-*/settings.json --ignore-failed-read 2>/dev/null || true
  echo "$archive: $(tar tzf "$archive" | wc -l) files"
  grep -h "dev f1" "$PEERS"/bna-run/paper-d"$PAPER_WIDTH"-*.log | tail -n 16 || true
  return "$status"
}

unpack() {  # unpack FILE: parses into results/peers/, run folders (logs, summaries) into $PEERS/bna-run/
  local file=${1:?archive} tmp
  tmp=$(mktemp -d)
  tar xzf "$file" -C "$tmp"
  cp "$tmp"/results/peers/*.test.trees results/peers/ 2>/dev/null || echo "no test parse in $file (no run finished)"
  mkdir -p "${UNPACK_PEERS:-/work/peers}/bna-run"
  cp -r "$tmp/$PEERS"/bna-run/. "${UNPACK_PEERS:-/work/peers}/bna-run/"
  rm -rf "$tmp"
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  unpack) shift; unpack "$@" ;;
  *) echo "usage: $0 pack | run | unpack FILE"; exit 2 ;;
esac
