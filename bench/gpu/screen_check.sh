#!/usr/bin/env bash
# The dashboard on a real GPU machine (the lent nvidia-h200-x2, or one H200):
# two real block-buffered PyTorch runs, one a GPU where there are two; then
#   1. gputui's GPU rows next to nvidia-smi, read at the same moments;
#   2. CPU of gputui --local vs nvitop vs `nvidia-smi -l 1`, same runs, same window;
#   3. flush live: `f` then `y` in the dashboard on a run behind `| tee`, through
#      gdb (carried as Debian .deb files in .deb/, unpacked under /tmp/debroot):
#      do lines reach the log without a restart?
# Run from the repository root with the wheels in .whl/ and the .deb files in
# .deb/ (that machine cannot download). Every step writes to $OUT and the
# script goes on when one fails.
set -u
OUT=${OUT:-/tmp/gputui-screen-check}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/screen_check.log") 2>&1
ROOT=$(pwd)
unset PYTHONUNBUFFERED  # the runs under test must be block-buffered, as in the field
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
RUN=/var/tmp/gputui-screen
rm -rf "$RUN" && mkdir -p "$RUN"
. bench/gpu/common.sh  # step, use_wheels, use_gdb_debs, cpu_window, read_rows, gdb_on_loop, flush_live, $UI

step "set-up: wheels, gdb from .deb, gputui from src/"
git log --oneline -1 2>/dev/null || true
use_wheels
if [ -d .deb ] && ! command -v gdb >/dev/null; then use_gdb_debs .deb /tmp/debroot; fi
tmux -V; python3 --version; gdb --version | head -1; py-spy --version
python3 -m nvitop --version 2>/dev/null | head -1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.device_count(), "GPUs")'

step "two real runs, one a GPU, each block-buffered behind | tee"
cp bench/gpu/train_torch.py "$RUN/train.py"
tmux new -d -s train0 -x 200 -y 50 -c "$RUN" \
  "CUDA_VISIBLE_DEVICES=0 python3 train.py 2>&1 | tee $RUN/train0.log"
G1=$(( $(nvidia-smi -L | wc -l) > 1 ? 1 : 0 ))  # one GPU: both runs share it
tmux new -d -s train1 -x 200 -y 50 -c "$RUN" \
  "CUDA_VISIBLE_DEVICES=$G1 python3 train.py --batch 8 --layers 6 2>&1 | tee $RUN/train1.log"
sleep "${TRAIN_WAIT:-40}"
ls -la "$RUN"

step "CPU over the same window: gputui --local vs nvitop vs nvidia-smi -l 1, while the rows are read"
cpu_window "$RUN" "$OUT/cpu_cost.json" &
COST=$!
sleep 10
UP=$(pgrep -f "^python3 -c import sys; from gputui.cli.main" | head -1)
timeout 40 py-spy record --pid "$UP" --duration 25 --rate 100 --format raw --nonblocking \
  -o "$OUT/gputui_profile.txt" >/dev/null 2>&1 &  # where the dashboard's CPU goes (collapsed stacks)
sleep 10
for k in 1 2 3; do  # the dashboard's GPU rows and nvidia-smi, read back to back
  read_rows "$k" "$OUT/rows.txt"
  sleep 8
done
wait $COST
cat "$OUT/cpu_cost.json"
cat "$OUT/rows.txt"

step "gdb alone on a plain block-buffered Python loop (no torch): what gdb says"
gdb_on_loop "$RUN" "$OUT"

step "flush live from the dashboard: f, then y, on train1 (block-buffered behind tee)"
after_flush() {
  echo "--- the run after the flush: state, and where its threads are"
  timeout 20 py-spy dump --pid "$1" 2>&1 | head -30
  echo "--- doctor after the flush"
  gputui doctor --local --session train1 --log "$RUN/train1.log" --stale-after 20
}
flush_live "$RUN/train1.log" "$OUT" 12 "0 2 4 6 8" after_flush

step "gdb by hand on train0 (torch, CUDA threads): threads first, then the same calls"
P0=$(pgrep -f "python3 train.py$" | head -1)
{
  echo "train0 pid $P0, log $(stat -c %s "$RUN/train0.log") bytes"
  flush_gdb 90 "$P0" -ex 'info threads' 2>&1 |
    grep -v '^\[New LWP\|^\[Thread debugging' | tail -40
  echo "gdb exit ${PIPESTATUS[0]}"
  sleep 3
  echo "after: log $(stat -c %s "$RUN/train0.log") bytes; state $(ps -o stat= -p "$P0")"
  sleep 3
  echo "3 s later: log $(stat -c %s "$RUN/train0.log") bytes"
} > "$OUT/gdb_train0.txt" 2>&1
cat "$OUT/gdb_train0.txt"
tmux send-keys -t ui q
tmux kill-server 2>/dev/null
echo done
