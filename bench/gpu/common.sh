# shellcheck shell=bash
# Sourced by every script in bench/gpu/ that runs on the GPU machine: the
# steps they share. Each writes to stdout; the caller tees it into $OUT.

step() { echo; echo "=== $(date +%T) $*"; }

# begin NAME DEFAULT_OUT: $OUT (DEFAULT_OUT unless set) made and all output
# from here on teed into $OUT/NAME.log; ROOT the repository root; $RUN
# (/var/tmp/gputui-NAME) made afresh; no PYTHONUNBUFFERED (the buffered
# scenes must be); NVLink multicast off (KINDS.md)
begin() {
  OUT=${OUT:-$2}
  mkdir -p "$OUT"
  exec > >(tee -a "$OUT/$1.log") 2>&1
  ROOT=$(pwd)
  RUN=/var/tmp/gputui-$1
  rm -rf "$RUN" && mkdir -p "$RUN"
  unset PYTHONUNBUFFERED
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
}

# gputui from src/ over the wheels in .whl/ (that machine cannot download)
use_wheels() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  export PYTHONPATH=$ROOT/src:${PYTHONPATH:-}
  export PATH=/tmp/site/bin:$PATH
}

# tmux from the Debian .deb files in .deb/ where the machine has none
use_tmux_debs() {
  local f
  if ! command -v tmux >/dev/null && [ -d .deb ]; then
    for f in .deb/*.deb; do dpkg -x "$f" /tmp/debroot; done
    export PATH=/tmp/debroot/usr/bin:$PATH
    export LD_LIBRARY_PATH=/tmp/debroot/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  fi
}

# use_gdb_debs DEBDIR UNPACKDIR: gdb from Debian .deb files, with its own
# libraries and Python only for gdb (a wrapper in /tmp/gdbbin): nothing else sees them
use_gdb_debs() {
  local debs=$1 root=$2 f
  for f in "$debs"/*.deb; do dpkg -x "$f" "$root"; done
  mkdir -p /tmp/gdbbin
  cat > /tmp/gdbbin/gdb <<EOF
#!/bin/sh
export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu
export PYTHONHOME=$root/usr DEBUGINFOD_URLS=
exec $root/usr/bin/gdb "\$@"
EOF
  chmod +x /tmp/gdbbin/gdb
  export PATH=/tmp/gdbbin:$PATH
}

# flush_gdb SECONDS PID [GDB ARGS...]: the dashboard's own gdb command for
# flush live (gputui.actions.flush.gdb_argv) under `timeout SECONDS`, GDB ARGS
# (e.g. -ex 'info threads') put before its calls. Needs gputui importable.
flush_gdb() {
  local secs=$1 pid=$2 argv
  shift 2
  mapfile -t argv < <(python3 -c 'import sys
from gputui.actions.flush import gdb_argv
print("\n".join(gdb_argv("gdb", int(sys.argv[1]))))' "$pid")
  timeout "$secs" "${argv[@]:0:5}" "$@" "${argv[@]:5}"  # gdb -p PID -batch -nx, the calls
}

# cpu_window RUN OUTFILE: gputui --local on train0, nvitop and `nvidia-smi -l 1`
# side by side over one CPU_SECONDS window, each in its own tmux pane
# (cpu_cost.py); its JSON into OUTFILE
cpu_window() {
  python3 bench/gpu/cpu_cost.py --seconds "${CPU_SECONDS:-40}" \
    "gputui=$UI --local --session train0 --log $1/train0.log --interval 1" \
    "nvitop=python3 -m nvitop --interval 1" \
    "smi=nvidia-smi -l 1" > "$2"
}

# read_rows LABEL OUTFILE: the dashboard's top rows (cpu_window's pane) and
# nvidia-smi's, read back to back
SMI_Q=index,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit
read_rows() {
  {
    echo "--- read $1 at $(date +%T.%N)"
    tmux capture-pane -p -t cpu-gputui | sed -n '1,14p'
    nvidia-smi --query-gpu=$SMI_Q --format=csv,noheader
  } >> "$2"
}

# gdb_on_loop RUN OUT: gdb alone on a plain block-buffered Python loop (no
# torch): does flushing through gdb's calls work there at all?
gdb_on_loop() {
  local run=$1 out=$2 lp
  printf 'import time\nn = 0\nwhile True:\n    n += 1\n    print(f"step {n} | loss 1.0 | tok/s 1000")\n    time.sleep(0.05)\n' > "$run/loop.py"
  tmux new -d -s loop -c "$run" "python3 loop.py | tee $run/loop.log"
  sleep 6
  lp=$(pgrep -f "^python3 loop.py" | head -1)
  {
    echo "loop pid $lp; before: $(stat -c %s "$run/loop.log") bytes"
    flush_gdb 60 "$lp"
    echo "gdb exit $?"
    sleep 2
    echo "after: $(stat -c %s "$run/loop.log") bytes; state $(ps -o stat= -p "$lp")"
    sleep 2
    echo "2 s later: $(stat -c %s "$run/loop.log") bytes"
  } > "$out/gdb_loop.txt" 2>&1
  cat "$out/gdb_loop.txt"
}

UI="python3 -c 'import sys; from gputui.cli.main import main; sys.exit(main())'"
gputui() { python3 -c 'import sys; from gputui.cli.main import main; sys.exit(main())' "$@"; }

# flush_live LOG OUT WAIT_AFTER_Y "SAMPLE SECONDS" [AFTER_FN]: the dashboard
# on LOG in a 120×36 tmux pane (session "ui"), `f` then `y`, the screen
# before and after, and whether the log grows without a restart; AFTER_FN
# (a function) adds what the caller wants to see after that.
flush_live() {
  local log=$1 out=$2 wait_y=$3 samples=$4 after=${5:-} s tp
  tmux new -d -s ui -x 120 -y 36 "$UI --local --session train1 --log $log --interval 1"
  sleep 12
  {
    echo "before: $(wc -l < "$log") lines, $(stat -c %s "$log") bytes at $(date +%T)"
    tmux send-keys -t ui f
    sleep 4
    tmux capture-pane -p -t ui | sed -n '1,36p'
    tmux send-keys -t ui y
    sleep "$wait_y"
    echo "--- after y"
    tmux capture-pane -p -t ui | sed -n '1,36p'
    for s in $samples; do
      echo "t+${s}s: $(wc -l < "$log") lines, $(stat -c %s "$log") bytes at $(date +%T)"
      sleep 2
    done
    tail -n 3 "$log"
    tp=$(pgrep -f "^python3 train.py --batch 8" | head -1)  # the run, not the tmux server whose command names it
    ps -o pid,stat,pcpu,cmd -p "$tp"
    if [ -n "$after" ]; then "$after" "$tp"; fi
  } > "$out/flush.txt" 2>&1
  cat "$out/flush.txt"
}
