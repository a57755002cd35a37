#!/usr/bin/env bash
# Issue 49 on the lent GPU machine: the verdict against the reruns' spread.
# A real PyTorch run (train_torch.py, batch 4) recorded by `gputui watch
# --local`, killed with `gputui kill` and run again, the same code, RERUNS
# times (3); then `--batch 16` (faster in tok/s: a real change). After each,
# `gputui doctor --local --json`'s `snapshot.vs_last`: its verdict, the test's
# words and the reruns' spread it used. RUN_SECONDS (35) each.
# Run from the repository root with the wheels in .whl/ and tmux in .deb/.
set -u
. bench/gpu/common.sh
begin reruns /tmp/gputui-reruns
use_wheels
use_tmux_debs
export XDG_STATE_HOME=$RUN/state
G="python3 -m gputui"
cp bench/gpu/train_torch.py "$RUN/train.py"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__)'; tmux -V; git log --oneline -1 2>/dev/null

start() { tmux new -d -s train -c "$RUN" "python3 -u train.py --batch $1 --d-model 1024 --layers 4 --seq 512 2>&1 | tee $RUN/train.log"; }
verdict() { $G doctor --local --session train --log "$RUN/train.log" --json > "$OUT/doctor_$1.json" 2>"$OUT/doctor_$1.err"
  python3 - "$OUT/doctor_$1.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); v = (d.get("snapshot") or {}).get("vs_last") or {}
print(sys.argv[2], "kinds:", [f["kind"] for f in d.get("findings", [])])
print(sys.argv[2], "verdict:", repr(v.get("verdict")), "|", v.get("headline"), "|", v.get("test"))
print(sys.argv[2], "reruns:", json.dumps(v.get("reruns")))
PY
}

step "the first run (batch 4), recorded by gputui watch"
start 4
$G watch --local --session train --log "$RUN/train.log" --interval 1 > "$OUT/watch.log" 2>&1 &
WATCH=$!
sleep "${RUN_SECONDS:-35}"
n=1
for b in $(seq 2 $(( ${RERUNS:-3} + 1 ))) faster; do
  $G kill --local --session train --yes 2>&1 | tail -1
  sleep 3
  if [ "$b" = faster ]; then start 16; label=faster; else start 4; label=rerun$b; fi
  sleep "${RUN_SECONDS:-35}"
  tail -1 "$RUN/train.log"
  verdict "$label"
done
$G history local --runs 2>&1 | tail -8
kill "$WATCH" 2>/dev/null; wait "$WATCH" 2>/dev/null
$G kill --local --session train --yes > /dev/null 2>&1
grep -E "against its last run|firing|resolved" "$OUT/watch.log" | tail -12
tmux kill-server 2>/dev/null
echo done
