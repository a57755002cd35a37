#!/usr/bin/env bash
# Round 10 on the lent GPU machine, one call:
#  1. issue 49 — did the deploy help? A real PyTorch run (train_torch.py, batch
#     16) recorded by `gputui watch --local`, killed with gputui, "deployed"
#     again with batch 4 (slower in tok/s), then rerun with batch 4 (the same
#     code: "same"); `gputui doctor --json` after each says the verdict
#     against the last run (snapshot.vs_last); `gputui history --compare`.
#  2. issue 47 — real failures named: a run killed by kill -9 behind tee
#     mid-bar, a real device-side assert (an embedding index out of range),
#     'grad norm: nan' every step (failures47.py); doctor --local --json after.
# Run from the repository root with the wheels in .whl/ and tmux in .deb/.
set -u
. bench/gpu/common.sh
begin deploy_words /tmp/gputui-deploy-words
use_wheels
use_tmux_debs
export XDG_STATE_HOME=$RUN/state
G="python3 -m gputui"
cp bench/gpu/train_torch.py "$RUN/train.py"; cp bench/gpu/failures47.py "$RUN/"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__)'; tmux -V

start() { tmux new -d -s train -c "$RUN" "python3 -u train.py --batch $1 --d-model 1024 --layers 4 --seq 512 2>&1 | tee $RUN/train.log"; }
verdict() { $G doctor --local --session train --log "$RUN/train.log" --json > "$OUT/doctor_$1.json" 2>"$OUT/doctor_$1.err"
  python3 - "$OUT/doctor_$1.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); v = (d.get("snapshot") or {}).get("vs_last")
print(sys.argv[2], "kinds:", [f["kind"] for f in d.get("findings", [])])
print(sys.argv[2], "vs_last:", json.dumps(v)[:1500] if v else None)
PY
}

step "1. the first run (batch 16), recorded by gputui watch"
start 16
$G watch --local --session train --log "$RUN/train.log" --interval 1 > "$OUT/watch.log" 2>&1 &
WATCH=$!
sleep "${RUN_SECONDS:-45}"
tail -2 "$RUN/train.log"
step "kill it with gputui, deploy batch 4 (slower)"
$G kill --local --session train --yes 2>&1 | tail -3
sleep 3
start 4
sleep "${RUN_SECONDS:-45}"
tail -2 "$RUN/train.log"
verdict slower
step "kill, rerun the same code (batch 4 again: same)"
$G kill --local --session train --yes 2>&1 | tail -3
sleep 3
start 4
sleep "${RUN_SECONDS:-45}"
verdict same
$G history local --runs 2>&1 | tail -8
ID=$($G history local --runs 2>/dev/null | awk '$1 ~ /^[0-9]+$/ {id=$1} END {print id}')
[ -n "$ID" ] && $G history local --compare "$ID" 2>&1 | tail -14
kill "$WATCH" 2>/dev/null; wait "$WATCH" 2>/dev/null
$G kill --local --session train --yes > /dev/null 2>&1
tail -20 "$OUT/watch.log"

[ -n "${SKIP_WORDS:-}" ] && { echo done; exit 0; }
step "2. real failures named"
for m in progress assert gradnan; do  # typed at a shell's prompt, as a user starts a run
  tmux new -d -s "$m" -c "$RUN" bash
  sleep 0.5
  tmux send-keys -t "$m" "python3 failures47.py $m 2>&1 | tee $RUN/$m.log" Enter
done
sleep 12
pkill -9 -f "failures47.py progress"   # the OOM killer's way: no word in the log
sleep 8
for m in progress assert gradnan; do
  $G doctor --local --session "$m" --log "$RUN/$m.log" --json > "$RUN/words_$m.json" 2>/dev/null
  python3 - "$RUN/words_$m.json" "$m" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], [(f["kind"], f["severity"], f["title"][:160]) for f in d.get("findings", [])])
PY
  tail -c 600 "$RUN/$m.log" | tr '\r' '\n' | tail -4
done
tmux kill-server 2>/dev/null
echo done
