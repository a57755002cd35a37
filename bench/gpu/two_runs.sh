#!/usr/bin/env bash
# Two real PyTorch runs on one GPU, watching one (issue 22). On the lent H200,
# from the repository root, wheels in .whl/ and tmux's .deb files in .deb/:
#
#     OUT=/tmp/out bash bench/gpu/two_runs.sh        # < 7 minutes
#
# 1. "eval" (batch 8) and "train" (batch 16) share GPU 0. doctor --local
#    --session train --json while both run: no advice to kill eval's PID,
#    eval's PID named "held by session eval (PID N)".
# 2. train deadlocks (--hang-after) while eval keeps the GPU busy: the watch
#    (bench/gpu/watch_words.py: the real Monitor on NVML, diagnose() twice a
#    second, --stale-after 10) must say "probably hung" <= hang_after_s (60) + 5 s
#    after train's last step, whatever eval does on the GPU.
# 3. one run alone deadlocks 100 steps (~7-10 s) after start: the first right
#    word (stalled / probably hung) <= stale threshold (10) + 5 s after its last step.
# Figures: $OUT/two_runs.log, $OUT/doctor_two_runs.json, $OUT/words_shared.jsonl,
# $OUT/words_early.jsonl, $OUT/checks.txt (one PASS/FAIL line per check).
set -u
OUT=${OUT:-/tmp/gputui-two-runs}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/two_runs.log") 2>&1
ROOT=$(pwd)
# shellcheck source=bench/gpu/common.sh
. bench/gpu/common.sh
RUN=/var/tmp/gputui-two-runs
rm -rf "$RUN" && mkdir -p "$RUN"
CHECKS="$OUT/checks.txt"
: > "$CHECKS"
check() { echo "$1 $2" | tee -a "$CHECKS"; }

step "set-up: wheels, tmux from .deb, gputui from src/"
[ -d .whl ] && use_wheels
export PYTHONPATH=$ROOT/src:${PYTHONPATH:-}
use_tmux_debs
tmux -V; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cp bench/gpu/train_torch.py "$RUN/train.py"
tmux kill-server 2>/dev/null

step "1. two runs on GPU 0: eval (batch 8) and train (batch 16, hangs after ${HANG_STEPS:-400} steps)"
tmux new -d -s eval -c "$RUN" "python3 -u train.py --batch 8 2>&1 | tee $RUN/eval.log"
tmux new -d -s train -c "$RUN" "python3 -u train.py --batch 16 --hang-after ${HANG_STEPS:-400} 2>&1 | tee $RUN/train.log"
python3 bench/gpu/watch_words.py --session train --log "$RUN/train.log" --stale-after 10 \
  --until "probably hung" --timeout "${SHARED_TIMEOUT:-200}" --out "$OUT/words_shared.jsonl" > "$OUT/watch_shared.txt" 2>&1 &
WATCH=$!
sleep "${DOCTOR_AT:-25}"
EVAL_PID=$(pgrep -f "^python3 -u train.py --batch 8" | head -1)
echo "eval PID $EVAL_PID; train log $(wc -l < "$RUN/train.log") lines"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
gputui doctor --local --session train --log "$RUN/train.log" --stale-after 10
gputui doctor --local --session train --log "$RUN/train.log" --stale-after 10 --json > "$OUT/doctor_two_runs.json"
python3 - "$OUT/doctor_two_runs.json" "$EVAL_PID" <<'PY' | tee -a "$CHECKS"
import json, re, sys
d = json.load(open(sys.argv[1])); pid = sys.argv[2]
said = " ".join(" ".join([f.get("title", ""), f.get("fix", "") or ""]) for f in d.get("findings", []))
kill = re.search(r"\bkill\b[^\n]*\b%s\b" % re.escape(pid), said)
print(("FAIL" if kill else "PASS") + " no advice to kill eval's PID %s" % pid + (": " + said if kill else ""))
procs = d.get("snapshot", d).get("gpus", {}).get("processes", [])
held = [p.get("held_by", "") for p in procs if str(p.get("host_pid")) == pid]
ok = any(h.startswith("held by session eval") for h in held)
print(("PASS" if ok else "FAIL") + " eval named with its session: %r" % held)
PY

step "2. train deadlocked while eval keeps GPU 0 busy: waiting for 'probably hung'"
wait "$WATCH"
tail -n 3 "$RUN/train.log"
python3 - "$OUT/words_shared.jsonl" <<'PY' | tee -a "$CHECKS"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
u = s.get("until")
t = None if not u else u.get("since_last_step")
print(("PASS" if t is not None and t <= 65 else "FAIL") + " probably hung %s s after train's last step (<= 60 + 5); first word %s; wrong before: %s"
      % (t, (s.get("first_word") or {}).get("word"), [w.get("word") for w in s.get("wrong_before", []) if w.get("since_last_step") not in (None, 0.0)]))
PY
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
tmux kill-server 2>/dev/null
sleep 3

step "3. one run alone deadlocks 100 steps after start"
tmux new -d -s alone -c "$RUN" "python3 -u train.py --batch 16 --hang-after 100 2>&1 | tee $RUN/alone.log"
python3 bench/gpu/watch_words.py --session alone --log "$RUN/alone.log" --stale-after 10 \
  --until "probably hung" --timeout "${ALONE_TIMEOUT:-110}" --out "$OUT/words_early.jsonl" > "$OUT/watch_early.txt" 2>&1
tail -n 2 "$RUN/alone.log"
python3 - "$OUT/words_early.jsonl" <<'PY' | tee -a "$CHECKS"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
f = s.get("first_word") or {}
t = f.get("since_last_step")
print(("PASS" if t is not None and t <= 15 else "FAIL") + " first word %s s after the last step (<= 10 + 5): %s; probably hung at %s s"
      % (t, f.get("word"), (s.get("until") or {}).get("since_last_step")))
PY
tmux kill-server 2>/dev/null
echo "done"; cat "$CHECKS"
