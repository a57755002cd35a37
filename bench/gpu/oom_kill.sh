#!/usr/bin/env bash
# Issue 47's kernel_oom_kill on a real kernel, on the lent GPU machine: a real
# PyTorch run (steps on the GPU, behind `2>&1 | tee LOG` in tmux) that, from
# step 15, grows its host memory 256 MiB a step — in a cgroup of its own with
# memory.max=MEM_MAX (1 GiB) where the machine lets us make one, so the
# kernel's OOM killer takes it ("Memory cgroup out of memory: Killed process
# N (python3) …") and nothing else. Then `gputui doctor --local --json` on
# the session and its log: the finding's kind and words, and what the kernel
# log said. Without a writable cgroup v2 it says so and stops: it never
# pushes the whole machine out of memory.
# Run from the repository root with the wheels in .whl/ and tmux in .deb/.
set -u
. bench/gpu/common.sh
begin oom_kill /tmp/gputui-oom-kill
use_wheels
use_tmux_debs
export XDG_STATE_HOME=$RUN/state
G="python3 -m gputui"
uname -r; tmux -V
python3 -c 'import torch; print("torch", torch.__version__)'

step "a cgroup of its own for the run (memory.max=${MEM_MAX:-1G})"
CG=
R=/sys/fs/cgroup
if [ -w $R/cgroup.procs ] && grep -qw memory $R/cgroup.controllers 2>/dev/null; then
  if ! grep -qw memory $R/cgroup.subtree_control; then
    # cgroup v2's rule: a cgroup with processes of its own cannot hand
    # controllers down — move this container's processes to a leaf first
    mkdir -p $R/gputui-rest
    for p in $(cat $R/cgroup.procs); do echo "$p" > $R/gputui-rest/cgroup.procs 2>/dev/null; done
    echo "+memory" > $R/cgroup.subtree_control || true
  fi
  if mkdir -p $R/gputui-oom && echo "${MEM_MAX:-1G}" > $R/gputui-oom/memory.max; then
    CG=$R/gputui-oom
    echo 0 > $CG/memory.swap.max 2>/dev/null || true
  fi
fi
cat $R/cgroup.controllers $R/cgroup.subtree_control 2>&1
cat /proc/self/cgroup
if [ -z "$CG" ]; then
  echo "no writable cgroup v2 with a memory controller here: not measured"
  ls -la /sys/fs/cgroup | head; exit 0
fi
cat $CG/memory.max
dmesg 2>&1 | tail -2 || true

cat > "$RUN/grow.py" <<'PY'
import os, sys, time
import torch
dev = torch.device("cuda")
w = torch.nn.Linear(2048, 2048).to(dev)
opt = torch.optim.SGD(w.parameters(), lr=1e-3)
hoard = []
print(f"started pid {os.getpid()}", flush=True)
for n in range(1, 10_000):
    x = torch.randn(256, 2048, device=dev)
    loss = w(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step(); torch.cuda.synchronize()
    if n >= 15:
        hoard.append(bytearray(256 << 20))  # 256 MiB of host memory a step, touched
        for b in hoard[-1:]:
            b[:: 4096] = b"\1" * (len(b) // 4096)
    print(f"step {n} | loss {loss.item():.4f} | host {len(hoard) * 256} MiB", flush=True)
    time.sleep(0.3)
PY

step "the run, in the cgroup, behind tee in tmux"
# the tmux server started from a shell already in the cgroup: its children are in it
ORIG=$(sed -n 's/^0:://p' /proc/self/cgroup)
echo $$ > $CG/cgroup.procs
tmux new -d -s train -c "$RUN" "python3 grow.py 2>&1 | tee $RUN/train.log"
echo $$ > "$R$ORIG/cgroup.procs" 2>/dev/null || true  # back where it was: only the run is limited
for i in $(seq 1 40); do
  sleep 1
  pgrep -f "python3 grow.py" > /dev/null || break
done
echo "run gone after ${i} s"
tail -3 "$RUN/train.log"
cat $CG/memory.events 2>/dev/null
dmesg 2>&1 | grep -E 'Killed process|oom-kill:|out of memory' | tail -4

step "gputui doctor --local on it"
sleep 2
$G doctor --local --session train --log "$RUN/train.log" > "$OUT/doctor.txt" 2>&1; echo "doctor exit $?"
cat "$OUT/doctor.txt"
$G doctor --local --session train --log "$RUN/train.log" --json > "$OUT/doctor.json" 2>/dev/null
python3 - "$OUT/doctor.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for f in d.get("findings", []):
    print(f["kind"], f["severity"], "|", f["title"])
print("kernel_oom:", json.dumps((d.get("snapshot") or {}).get("kernel_oom"))[:800])
PY
tmux kill-server 2>/dev/null
rmdir $CG 2>/dev/null
echo done
