#!/usr/bin/env bash
# Check gputui against a real NVIDIA GPU and a real PyTorch run, side by side
# with nvitop. Meant for the lent H200 machine (see docs/real-gpu.md), run
# from the repository root with the wheels in .whl/ and tmux's .deb files in
# .deb/ (that machine cannot download). Every step writes to $OUT and the
# script goes on when one fails, so one run gives the whole picture.
set -u
. bench/gpu/common.sh  # begin, step, use_wheels, use_tmux_debs, gputui
begin real_gpu /tmp/gputui-real-gpu  # the run under test block-buffered, as in the field

step "set-up: wheels, tmux from .deb, gputui from src/"
use_wheels
use_tmux_debs
tmux -V; python3 --version; py-spy --version; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'

if [ -z "${SKIP_COMPARE:-}" ]; then
step "idle: NVML vs nvidia-smi"
python3 bench/gpu/compare_readers.py --samples 5 --label idle | tee "$OUT/compare_idle.json"
fi

step "a real training run, block-buffered behind | tee"
cp bench/gpu/train_torch.py "$RUN/train.py"
tmux new -d -s train -c "$RUN" "python3 train.py 2>&1 | tee $RUN/train.log"
sleep ${TRAIN_WAIT:-45}
echo "log bytes after 45 s: $(stat -c %s "$RUN/train.log")"

if [ -z "${SKIP_COMPARE:-}" ]; then
step "busy: NVML vs nvidia-smi"
python3 bench/gpu/compare_readers.py --samples 8 --label busy | tee "$OUT/compare_busy.json"
fi

step "doctor --local (NVML) on the buffered run"
time gputui doctor --local --session train --log "$RUN/train.log" --stale-after 20
gputui doctor --local --session train --log "$RUN/train.log" --stale-after 20 --json > "$OUT/doctor_buffered.json"; echo "exit $?"
printf '[gpu]\nsource = "host"\n' > "$RUN/smi.toml"
step "doctor --local with the nvidia-smi stream instead of NVML"
gputui doctor --local --config "$RUN/smi.toml" --session train --log "$RUN/train.log" --stale-after 20; echo "exit $?"

step "CPU cost at 1 Hz, side by side: gputui --local vs nvitop vs nvidia-smi -l 1"
python3 bench/gpu/cpu_cost.py --seconds ${CPU_SECONDS:-40} \
  "gputui=python3 -c 'import sys; from gputui.cli.main import main; sys.exit(main())' --local --session train --log $RUN/train.log --interval 1" \
  "nvitop=python3 -m nvitop --interval 1" \
  "smi=nvidia-smi -l 1" | tee "$OUT/cpu_cost.json"

step "py-spy dump through gputui"
gputui dump --local --session train --yes; echo "exit $?"

step "relaunch with flushing"
before=$(stat -c %s "$RUN/train.log")
t0=$(date +%s.%N)
gputui relaunch --local --session train --log "$RUN/train.log" --yes; echo "exit $?"
sleep 25
ls -la "$RUN"
echo "new log lines: $(wc -l < "$RUN/train.log")"; tail -n 3 "$RUN/train.log"
gputui doctor --local --session train --log "$RUN/train.log" --stale-after 20; echo "doctor after relaunch: exit $?"

step "kill: GPU memory freed?"
gputui kill --local --session train --yes; echo "exit $?"
sleep 3
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
nvidia-smi --query-compute-apps=pid,used_memory --format=csv

step "a hung run holding GPU memory (unbuffered) must be called hung, not buffered"
tmux new -d -s hung -c "$RUN" "python3 -u train.py --hang-after 30 2>&1 | tee -a $RUN/hung.log"
sleep ${HUNG_WAIT:-100}
tail -n 2 "$RUN/hung.log"
gputui doctor --local --session hung --log "$RUN/hung.log" --stale-after 20; echo "exit $?"
gputui doctor --local --session hung --log "$RUN/hung.log" --stale-after 20 --json > "$OUT/doctor_hung.json"
gputui kill --local --session hung --force --yes; echo "exit $?"
tmux kill-server 2>/dev/null
echo "done"
