#!/usr/bin/env bash
# gputui's CPU while a run's log streams, on the lent GPU machine (issue 24):
# the GPUs busy with a real PyTorch run (train_torch.py, so every NVML read
# is real), and a stand-in trainer logging HF-Trainer dict lines
# (bench/hf_writer.py, behind `| tee`) at 20 lines/s, 40 lines/s and
# block-buffered; gputui --local, nvitop --interval 1 and toolong follow it,
# each in a 120×36 tmux pane, all at once, one 40 s window per scenario
# (bench/stream_cost.py). A py-spy profile of gputui in each window (250
# samples a second: PROFILE_RATE), summarized per function and per process
# (bench/profile_summary.py) into $OUT/gputui_profile-*-summary.txt
# (with STREAM_PROFILE=1).
# Targets (issue 37): gputui ≤ 1.5× nvitop while the log streams, ≤ 1.2×
# buffered.
#
# The field scene ("two runs 20 lines/s", issue 37): the watched run at 20
# lines/s, a second run logging at 5 lines/s beside it, a second PyTorch
# process sharing GPU 0 with the load (the shared-GPU line under the GPU
# rows), a `nvidia-smi` every second in a session of its own — with the
# measured tools' own sessions, as users have them.
# After each streaming window, line → screen: every line carries its
# writing time and the gputui pane (and tail -F's) is read every 20 ms
# (tmux capture-pane) for LATENCY_SECONDS (12) — p50/p95 per tool.
#
# STREAM_ONLY='buffered,20 lines/s' measures those scenarios only, in that order.
# CPU_WINDOWS=3 measures each scene over 3 windows in a row and reports each
# tool's median and the ratio window by window (a single window swung by
# 0.5 % of a core between runs 28 and 29: the same code).
# STREAM_PROFILE=1 adds the py-spy profiles (off by default: at 250 Hz py-spy
# saw a quarter of the CPU the window counted — run 25: 78 busy samples, ~1 %
# of a core, against 4.02 %; each window now prints user+sys of every
# process and thread of gputui's tree instead, bench/gpu/cpu_cost.py parts).
#
# Run from the repository root with the wheels in .whl/ (nvitop among them)
# and toolong's in .whl/toolong/ (it pins Textual 0.58, so it gets a site of
# its own): about 4 minutes, everything under $OUT.
set -u
. bench/gpu/common.sh  # begin, step, use_wheels, use_tmux_debs
begin stream_cost /tmp/gputui-stream-cost

step "set-up: wheels, toolong in its own site, tmux from .deb, gputui from src/"
git log --oneline -1 2>/dev/null || true
use_wheels
use_tmux_debs
TOOLONG=
if [ -d .whl/toolong ]; then
  python3 -m pip install -q --no-index --no-compile --no-cache-dir \
    --find-links .whl/toolong --find-links .whl --target /tmp/tlsite toolong &&
    TOOLONG="env PYTHONPATH=/tmp/tlsite python3 -c 'import sys; from toolong.cli import run; sys.exit(run())'"
fi
[ -n "$TOOLONG" ] || echo "no toolong (.whl/toolong/ missing): measured without it"
tmux -V; python3 --version; py-spy --version; python3 -m nvitop --version 2>/dev/null | head -1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv

step "the GPUs busy: a real PyTorch run (its own log, not the one watched)"
cp bench/gpu/train_torch.py "$RUN/train.py"
TMUX_TMPDIR=$RUN tmux new -d -s gpuload -c "$RUN" "CUDA_VISIBLE_DEVICES=0 python3 train.py > $RUN/gpuload.log 2>&1"
sleep "${TRAIN_WAIT:-30}"
nvidia-smi --query-gpu=index,utilization.gpu,memory.used,power.draw --format=csv

step "CPU while the log streams: gputui vs nvitop vs toolong, 20 and 40 lines/s, buffered, the field scene"
export FIELD_GPU_CMD="CUDA_VISIBLE_DEVICES=0 python3 $RUN/train.py --batch 8 > $RUN/eval-gpu.log 2>&1"
timeout 540 python3 bench/stream_cost.py --seconds "${CPU_SECONDS:-40}" --windows "${CPU_WINDOWS:-1}" \
  ${TOOLONG:+--toolong "$TOOLONG"} \
  ${STREAM_ONLY:+--only "$STREAM_ONLY"} \
  --extra "nvitop=python3 -m nvitop --interval 1" \
  --json "$OUT/stream_cost.json" ${STREAM_PROFILE:+--profile "$OUT/gputui_profile"}
TMUX_TMPDIR=$RUN tmux kill-server 2>/dev/null

step "where gputui's CPU goes: a per-function summary of each profile"
for prof in "$OUT"/gputui_profile-*.txt; do
  case $prof in *-summary.txt) continue ;; esac
  [ -f "$prof" ] || continue
  python3 bench/profile_summary.py "$prof" --top 40 > "${prof%.txt}-summary.txt"
  echo "-- $prof"
  python3 bench/profile_summary.py "$prof" --top 16
done
echo done
