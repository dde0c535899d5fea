#!/usr/bin/env bash
# The SG-Net reading-comprehension runs committed in results/squad2.jsonl (+ results/squad2/<run>.json),
# results/race_m.jsonl and results/mctest500.jsonl. 2-core CPU, torch 2.13, all-MiniLM-L6-v2, two lanes
# side by side with one thread each. A run whose line is already recorded is skipped; an interrupted run resumes
# from its checkpoint (same --output-dir).
#
# SQuAD 2.0 (CPU budget, not the paper's): the article split of the 2.0 dev file (src/structattn/tasks/squad2_split.json;
# SQuAD 2.0 train is not available here, SQuAD 1.1 train NOT added); training on the first 3,000 questions of the
# train part (of 6,305), model selection and the no-answer threshold on the dev part (1,395 questions), test part
# 4,173 questions; windows of 256 tokens sharing at most 128, batch 16, AdamW 1e-4 with 10 % warm-up, 2 epochs,
# batches of similar length.
# Multiple choice (pooled heads read the mean of the tokens, --pool mean, for baseline and SG-Net alike: one SG layer
# cannot bring syntax to [CLS]; see README): MCTest MC500 (train 1,200 / dev 200 / test 600 questions) and RACE-M
# (a stated subset: the first 1,500 training questions of 25,421 and the first 400 dev questions; the whole test
# split, 1,436 questions); inputs of 256 tokens (passages cut from their end, counted in the logs), batch 4
# questions (16 option inputs), AdamW 5e-5, 2 epochs.
# Sentence tasks (the sentence runner's sgnet variant beside baseline rows of the same settings): CoLA (2 epochs)
# and SST-2 (first 10,000 training sentences, 1 epoch), max length 64, batch 32, 5e-5, 3 seeds; 2 threads unless
# SWEEP_THREADS says otherwise (1 when it shares the machine with another lane).
#   bash experiments/run_reading_experiments.sh squad-a | squad-b | squad-encoder | squad-encoder-a|b [SEED...] | encoder-ablation [ROW...] | mc-option-a|b [SEED...] | mc-race-a|b [SEED...] | reader-cpu [SEED] | reader-comparison | ablation | ablation-a | ablation-b | mc-a | mc-b | sentence | both
# (ablation-a and ablation-b split the four Table 3 rows over two lanes)
set -uo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# with_threads N CMD...: CMD on N threads; float32 matrix products read MKL's variable, the rest OpenMP's
with_threads() { local n=$1; shift; OMP_NUM_THREADS=$n MKL_NUM_THREADS=$n "$@"; }
BIN=${BIN:-.venv/bin}
. experiments/recipe.sh
SQUAD="--task squad2 --max-train-examples 3000 --epochs 2 --max-length 256 --stride 128 --batch-size 16
       --eval-batch-size 64 --learning-rate 1e-4 --warmup-ratio 0.1 --group-by-length true --eval-every 0"

run() {  # run RESULTS_FILE NAME FLAGS... (RESULTS_FILE: squad2, race, mctest)
  local file=$1 name=$2; shift 2
  recorded results/$file.jsonl "$name" && return
  trained runs/reading/$name.log "$name" $BIN/structattn train "$@" --output-dir runs/reading/$name || return
  $BIN/python experiments/record.py reading runs/reading/$name $name \
    >> runs/reading/$name.log 2>&1 || echo "RECORD FAILED $name"
}

squad_lane_a() {
  for s in 1 2 3; do run squad2 squad2-baseline-s$s $SQUAD --sgnet none --seed $s; done
}
squad_lane_b() {
  for s in 1 2 3; do run squad2 squad2-sgnet-s$s $SQUAD --sgnet dual --seed $s; done
}
ablation() {  # the paper's Table 3 rows, seed 1: ablation AGGREGATION... (default: all four)
  for agg in "${@:-vanilla sg_only concat biattention}"; do
    for a in $agg; do run squad2 squad2-sgnet_$a-s1 $SQUAD --sgnet $a --seed 1; done
  done
}
MC="--max-length 256 --batch-size 4 --eval-batch-size 64 --learning-rate 5e-5 --warmup-ratio 0.1 --epochs 2
    --eval-every 0 --pool mean"
# At scale: SG-Net against the baseline on the SQuAD-trained reader's encoder (the H100 run of
# experiments/run_reading_gpu.sh, runs/reading/base-s1-gpu/best: SQuAD 1.1 train + the squad2 train part). Both variants
# keep that encoder and start their heads fresh (--model-parts encoder): the baseline a new span head, SG-Net a new
# SG layer + span head, as the paper adds SG-Net to a pretrained encoder. One epoch of the whole squad2 train part
# (6,305 questions), autocast in $PRECISION (bf16 by default), model selection and the no-answer threshold on the dev part every 200 updates.
# READER names the reader and ENC the runs' infix: the CPU reader's runs (squad2-cpuenc-*; READER_RUN and READER_ENC of
# experiments/recipe.sh: squad2-fp32enc-* in float32) are
#   READER=runs/reading/reader-cpu-s1/best ENC=cpuenc bash experiments/run_reading_experiments.sh squad-encoder
# and on two lanes (baselines on one, SG-Net on the other, seeds 1-3; then the rows with encoder-ablation):
#   READER=runs/reading/reader-cpu-s2-step1500 ENC=cpuenc2 bash experiments/run_reading_experiments.sh squad-encoder-a
#   READER=runs/reading/reader-cpu-s2-step1500 ENC=cpuenc2 bash experiments/run_reading_experiments.sh squad-encoder-b
# (reader-cpu-s2-step1500: a copy of runs/reading/reader-cpu-s2/best when that run, seed 2 of reader-cpu, was
# stopped after update 1,500 of 2,970, its best dev F1 60.27 at that update; `cp -r runs/reading/reader-cpu-s2/best
# runs/reading/reader-cpu-s2-step1500`)
READER=${READER:-runs/reading/base-s1-gpu/best}
ENC=${ENC:-enc}
SQUAD_ENC="--task squad2 --model $READER --model-parts encoder --epochs 1 --max-length 256 --stride 128
       --batch-size 16 --eval-batch-size 64 --learning-rate 5e-5 --warmup-ratio 0.1 --group-by-length true
       --eval-every 200 --precision $PRECISION"
squad_encoder_lane() {  # baseline and SG-Net by seed, then the Table 3 rows (seed 1)
  for s in 1 2 3; do
    run squad2 squad2-$ENC-baseline-s$s $SQUAD_ENC --sgnet none --seed $s
    run squad2 squad2-$ENC-sgnet-s$s $SQUAD_ENC --sgnet dual --seed $s
  done
  encoder_ablation vanilla sg_only concat biattention
}
squad_encoder_split() {  # squad_encoder_split SGNET [SEED...]: one variant's seeds (default 1-3; two lanes: none
                         # here, dual there)
  local sgnet=$1 variant=$([ "$1" = none ] && echo baseline || echo sgnet) s; shift
  [ $# -gt 0 ] || set -- 1 2 3
  for s in "$@"; do run squad2 squad2-$ENC-$variant-s$s $SQUAD_ENC --sgnet $sgnet --seed $s; done
}
encoder_ablation() {  # encoder_ablation ROW...: Table 3 rows on the reader's encoder, seed 1 (a second lane: in
                      # another order than squad_encoder_lane's, so that two lanes do not train the same row)
  for a in "$@"; do run squad2 squad2-$ENC-sgnet_$a-s1 $SQUAD_ENC --sgnet $a --seed 1; done
}
mc_lane() {  # mc_lane VARIANT SGNET
  for s in 1 2 3; do run mctest mctest500-$1-s$s --task mctest500 $MC --sgnet $2 --seed $s; done
  for s in 1 2 3; do
    run race race_m-$1-s$s --task race_m $MC --max-train-examples 1500 --max-eval-examples 400 --sgnet $2 --seed $s
  done
}
# MCTest MC500 with the option pool (the small-scale runs above used --pool mean and stayed at chance), from
# all-MiniLM-L6-v2 itself (a RACE-trained encoder to start from was not yet at hand):
# 384 tokens (110 of 1,200 training questions have their story cut), batch 4 questions, AdamW 1e-4, one epoch
# (300 updates), dev accuracy every 100 updates, bf16 autocast. About 9 s an update on one thread here.
MC_OPTION="--task mctest500 --pool option --max-length 384 --batch-size 4 --eval-batch-size 64 --learning-rate 1e-4
    --warmup-ratio 0.1 --epochs 1 --eval-every 100 --precision $PRECISION"
mc_option_lane() {  # mc_option_lane VARIANT SGNET SEED...
  local variant=$1 sgnet=$2; shift 2
  for s in "${@:-1}"; do run mctest mctest500-option-$variant-s$s $MC_OPTION --sgnet $sgnet --seed $s; done
}
# MCTest MC500 from the RACE-trained encoder: the RACE-M baseline of experiments/run_reading_gpu.sh's
# `race` (race_m-cpuenc2-baseline-s1: trained on an H200 from reader-cpu-s2-step1500's encoder, its best/ shipped back
# rounded to bfloat16 and rebuilt here with `unpack_best`). Both variants keep that encoder (--model-parts encoder) and
# start the multiple-choice head (and SG-Net its SG layer) fresh; otherwise the MC_OPTION runs above.
RACE_ENCODER=${RACE_ENCODER:-runs/reading/race_m-cpuenc2-baseline-s1/best}
mc_race_lane() {  # mc_race_lane VARIANT SGNET SEED...
  local variant=$1 sgnet=$2; shift 2
  for s in "${@:-1}"; do
    run mctest mctest500-raceenc-$variant-s$s $MC_OPTION --model $RACE_ENCODER --model-parts encoder --sgnet $sgnet \
      --seed $s
  done
}
# The reader on this CPU: the recipe of experiments/run_reading_gpu.sh's reader (squad2_plus11 =
# SQuAD 1.1 train + the squad2 train part, windows of 384 tokens sharing at most 128, batch 32, AdamW 1e-4, 10 %
# warm-up, autocast in $PRECISION over float32 weights) for ONE epoch (2,970 updates; the H100 reader's dev curve was
# flat after 3,000), batches of similar length (measured on an avx512_bf16 CPU on 8 updates of 32 windows, 2 threads,
# bf16: about 5.3 s an update at 384 tokens, 3.8 s at 256 with 19 % more windows, so 256 would save about 17 % an
# epoch; 384 kept, as on the GPU), dev part every 500 updates, a checkpoint every 100 (resumable: rerun the lane).
# About 4.5 hours on both threads there. Then SQuAD 1.1 dev and the squad2 test part are predicted and recorded as
# squad11-$READER_RUN-sSEED and squad2-$READER_RUN-sSEED. On a CPU without bfloat16 instructions:
#   PRECISION=fp32 READER_RUN=reader-fp32 bash experiments/run_reading_experiments.sh reader-cpu 1
READER_CPU="--task squad2_plus11 --precision $PRECISION --batch-size 32 --eval-batch-size 64 --epochs 1 --max-length 384
    --stride 128 --learning-rate 1e-4 --warmup-ratio 0.1 --group-by-length true --eval-every 500 --checkpoint-every 100"
reader_cpu() {  # reader_cpu SEED
  local s=${1:-1}
  local name=$READER_RUN-s$s
  local dir=runs/reading/$name
  if ! grep -q '"finished": true' "$dir/trainer_state.json" 2>/dev/null; then   # else trained: record only
    echo "== $name: $READER_CPU --seed $s"
    with_threads ${READER_THREADS:-2} $BIN/structattn train $READER_CPU --seed $s --output-dir $dir \
      >> $dir.log 2>&1 || { echo "FAILED $name ($dir.log)"; return 1; }
  fi
  for task in squad11 squad2; do
    recorded results/$task.jsonl "$task-$name" && continue
    with_threads ${READER_THREADS:-2} $BIN/python experiments/record.py reading $dir \
      $task-$name --task $task >> $dir.log 2>&1 || echo "RECORD FAILED $task-$name"
  done
}
# SG-Net against the baseline at the CPU reader's level: the reader (seed 1, as above), then baseline and SG-Net
# (dual) on its encoder, seeds 1-3 each, on two lanes of one thread (squad-encoder-a and -b with READER and ENC set
# to that reader: runs squad2-$READER_ENC-baseline-sSEED and squad2-$READER_ENC-sgnet-sSEED). Every step skips what
# is recorded and resumes what was interrupted, so the same command goes on where it stopped:
#   PRECISION=fp32 READER_RUN=reader-fp32 bash experiments/run_reading_experiments.sh reader-comparison
reader_comparison() {
  reader_cpu 1 || return
  for lane in squad-encoder-a squad-encoder-b; do
    READER=runs/reading/$READER_RUN-s1/best ENC=$READER_ENC bash experiments/run_reading_experiments.sh $lane &
  done
  wait
}
sentence() {  # appended to results/<task>.jsonl by the sentence runner's sweep
  for task in cola sst2; do
    extra=$([ $task = sst2 ] && echo "--epochs 1 --max-train-examples 10000" || echo "--epochs 2")
    with_threads ${SWEEP_THREADS:-2} $BIN/structattn sweep --results-dir results --run-root runs/sweeps --eval-every 0 --batch-size 32 \
      --learning-rate 5e-5 --task $task --variants global sgnet --seeds 1 2 3 --max-length 64 $extra \
      > runs/reading/sweep-$task.log 2>&1 || echo "FAILED sweep $task (runs/reading/sweep-$task.log)"
  done
}

mkdir -p runs/reading
case "${1:-both}" in
  squad-a) squad_lane_a ;;
  squad-b) squad_lane_b ;;
  squad-encoder) squad_encoder_lane ;;
  squad-encoder-a) shift; squad_encoder_split none "$@" ;;
  squad-encoder-b) shift; squad_encoder_split dual "$@" ;;
  encoder-ablation) shift; [ $# -gt 0 ] || set -- biattention concat sg_only vanilla; encoder_ablation "$@" ;;
  ablation) ablation ;;
  ablation-a) ablation vanilla concat ;;
  ablation-b) ablation sg_only biattention ;;
  mc-a) mc_lane baseline none ;;
  mc-b) mc_lane sgnet dual ;;
  mc-option-a) shift; mc_option_lane baseline none "$@" ;;
  mc-option-b) shift; mc_option_lane sgnet dual "$@" ;;
  mc-race-a) shift; mc_race_lane baseline none "$@" ;;
  mc-race-b) shift; mc_race_lane sgnet dual "$@" ;;
  reader-cpu) shift; reader_cpu "$@" ;;
  reader-comparison) reader_comparison ;;
  sentence) sentence ;;
  both) squad_lane_a & squad_lane_b & wait ;;
esac
