#!/usr/bin/env bash
# Issue #16 re-check on one lent H200 (run 7): after the UI's CPU work, the
# CPU of gputui --local vs nvitop vs `nvidia-smi -l 1` (same runs, same
# window, twice), where gputui's CPU goes (py-spy), its GPU rows next to
# nvidia-smi, why gdb cannot call into a process there (xstate_check.py), and
# flush live from the dashboard with Debian trixie's gdb 16.3 (carried as
# .deb files in .device/gdb16/, unpacked under /tmp/gdb16, seen only by gdb).
# Run from the repository root with the wheels in .whl/. Every step writes to
# $OUT and the script goes on when one fails. CPU_ONLY=1: only the CPU
# windows (WINDOWS of them, default 2), the profile and the rows.
set -u
OUT=${OUT:-/tmp/gputui-recheck}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/recheck.log") 2>&1
ROOT=$(pwd)
unset PYTHONUNBUFFERED  # the runs under test must be block-buffered, as in the field
RUN=/var/tmp/gputui-recheck
rm -rf "$RUN" && mkdir -p "$RUN"
. bench/gpu/common.sh  # step, use_wheels, use_gdb_debs, cpu_window, read_rows, gdb_on_loop, flush_live, $UI

step "set-up: wheels, gdb 16 from .deb, gputui from src/"
# (no `git log` here: the device's copy of .git can lag its working tree; the record names the commit)
echo "batcher in this tree: $(grep -c BATCH_PY src/gputui/monitor/logfollow.py) / lean screen: $(ls src/gputui/ui/compositor.py)"
use_wheels
if [ -d .device/gdb16 ]; then
  use_gdb_debs .device/gdb16 /tmp/gdb16
  LD_LIBRARY_PATH=/tmp/gdb16/usr/lib/x86_64-linux-gnu:/tmp/gdb16/lib/x86_64-linux-gnu \
    ldd /tmp/gdb16/usr/bin/gdb | grep 'not found' || echo "gdb 16: every library found"
else
  echo "no .device/gdb16: gdb is the machine's own, if any"
fi
uname -r; grep -m1 'model name' /proc/cpuinfo; nproc
tmux -V; python3 --version; gdb --version | head -1; py-spy --version
python3 -m nvitop --version 2>/dev/null | head -1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv

if [ -z "${CPU_ONLY:-}" ]; then
step "XSAVE sizes: CPUID vs the kernel's ptrace, and PTRACE_SETREGSET with each"
python3 bench/gpu/xstate_check.py | tee "$OUT/xstate.json"
fi

step "two real runs on this GPU, each block-buffered behind | tee"
cp bench/gpu/train_torch.py "$RUN/train.py"
tmux new -d -s train0 -x 200 -y 50 -c "$RUN" "python3 train.py 2>&1 | tee $RUN/train0.log"
tmux new -d -s train1 -x 200 -y 50 -c "$RUN" \
  "python3 train.py --batch 8 --layers 6 2>&1 | tee $RUN/train1.log"
sleep "${TRAIN_WAIT:-40}"
ls -la "$RUN"

for k in $(seq "${WINDOWS:-2}"); do
  step "CPU, window $k: gputui --local vs nvitop vs nvidia-smi -l 1"
  cpu_window "$RUN" "$OUT/cpu_cost_$k.json" &
  COST=$!
  if [ "$k" = 1 ]; then
    sleep 10
    UP=$(pgrep -f "^python3 -c import sys; from gputui.cli.main" | head -1)
    timeout 40 py-spy record --pid "$UP" --duration 30 --rate 200 --format raw --nonblocking \
      -o "$OUT/gputui_profile.txt" >/dev/null 2>&1 &
    sleep 15
    read_rows 1 "$OUT/rows.txt"
  fi
  wait "$COST"
  cat "$OUT/cpu_cost_$k.json"
done
cat "$OUT/rows.txt"
if [ -n "${CPU_ONLY:-}" ]; then tmux kill-server 2>/dev/null; echo done; exit 0; fi

step "gdb 16 on a plain block-buffered Python loop (no torch)"
gdb_on_loop "$RUN" "$OUT"

step "flush live from the dashboard: f, then y, on train1"
gpu_now() { nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; }
flush_live "$RUN/train1.log" "$OUT" 15 "0 2 4 6" gpu_now
tmux send-keys -t ui q
tmux kill-server 2>/dev/null
echo done
