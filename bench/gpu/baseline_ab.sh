#!/usr/bin/env bash
# Two source trees of gputui, window by window, on the lent GPU machine
# (issue 37): the GPUs busy with a real PyTorch run (so every NVML read is
# real), a stand-in trainer's log block-buffered and then streaming 20
# lines a second, `gputui --local` from each tree in turn in a 120×36 tmux
# pane (bench/baseline_cost.py: the trees take turns, so the machine's
# swings weigh on both alike — runs 28 and 29, the same code, read 2.10 and
# 2.60 % apart).
#
#   BASE=path/to/old/src bash bench/gpu/baseline_ab.sh
#
# From the repository root with the wheels in .whl/ and tmux in .deb/;
# AB_SECONDS (30) per window, AB_RUNS (3) windows per tree and scene,
# AB_RATES ("buffered 20"); everything under $OUT.
set -u
. bench/gpu/common.sh
begin baseline_ab /tmp/gputui-ab

step "set-up: wheels, tmux from .deb"
use_wheels
use_tmux_debs
[ -d "${BASE:-}/gputui" ] || { echo "BASE=${BASE:-} holds no gputui/: name the old tree's src/"; exit 2; }

step "the GPUs busy: a real PyTorch run"
cp bench/gpu/train_torch.py "$RUN/train.py"
TMUX_TMPDIR=$RUN tmux new -d -s gpuload -c "$RUN" "CUDA_VISIBLE_DEVICES=0 python3 train.py > $RUN/gpuload.log 2>&1"
sleep "${TRAIN_WAIT:-20}"

for rate in ${AB_RATES:-buffered 20}; do
  step "$rate: $BASE against $ROOT/src"
  flag=
  [ "$rate" = buffered ] || flag="--rate $rate"
  # shellcheck disable=SC2086
  python3 bench/baseline_cost.py --seconds "${AB_SECONDS:-30}" --runs "${AB_RUNS:-3}" $flag \
    --src "$BASE" --src "$ROOT/src"
done
TMUX_TMPDIR=$RUN tmux kill-server 2>/dev/null
echo done
