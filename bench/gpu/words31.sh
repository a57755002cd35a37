#!/bin/bash
# Issue 31 on the lent GPU machine: a real CUDA OOM, a real NaN loss and a
# run that flushes its own lines behind tee, each watched by the real
# Monitor + diagnose() (watch_words.py); doctor --json on the flushed one.
# Run from the checkout root with OUT set; raw output under $OUT.
set -u
ROOT=$PWD
source bench/gpu/common.sh
step "setup"
if ! command -v tmux >/dev/null; then
  for f in .deb/*.deb; do dpkg -x "$f" /tmp/tmuxroot; done
  export PATH=/tmp/tmuxroot/usr/bin:$PATH
  export LD_LIBRARY_PATH=/tmp/tmuxroot/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
tmux -V; python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())'
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
RUN=/tmp/r31; mkdir -p "$RUN"; cp bench/gpu/failures31.py "$RUN/"
for m in oom nan flushed; do
  tmux new -d -s "$m" -c "$RUN" "env -u PYTHONUNBUFFERED python3 failures31.py $m 2>&1 | tee $RUN/$m.log"
done
step "watch (three at once)"
python3 bench/gpu/watch_words.py --session oom --log $RUN/oom.log --right cuda_oom \
  --until "CUDA out of memory" --timeout 45 --out "$OUT/oom_words.jsonl" > /dev/null 2>&1 &
python3 bench/gpu/watch_words.py --session nan --log $RUN/nan.log --right loss_nan \
  --until "loss is" --timeout 45 --out "$OUT/nan_words.jsonl" > /dev/null 2>&1 &
python3 bench/gpu/watch_words.py --session flushed --log $RUN/flushed.log \
  --right buffered_output,busy_but_silent --until "never" --timeout 45 \
  --out "$OUT/flushed_words.jsonl" > /dev/null 2>&1 &
sleep 20
step "doctor on the flushed run"
python3 -m gputui doctor --local --session flushed --log $RUN/flushed.log --json \
  > "$OUT/doctor_flushed.json" 2> "$OUT/doctor_flushed.err"
echo "doctor exit $?"
wait
step "results"
for f in oom nan flushed; do echo "--- $f"; cat "$OUT/${f}_words.jsonl"; done
python3 - "$OUT/doctor_flushed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("doctor exit_code", d.get("exit_code"), "kinds", [f["kind"] for f in d["findings"]])
print("buffering", json.dumps(d["snapshot"]["process"]["buffering"]))
PY
for m in oom nan flushed; do cp "$RUN/$m.log" "$OUT/$m.log"; done
tmux kill-server 2>/dev/null
