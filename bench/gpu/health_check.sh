#!/usr/bin/env bash
# Issue 32 on the lent H200 (docs/real-gpu.md): every health field read and
# shown, the cost of reading them, the kernel-log reader at work, a busy
# H200 at its power cap not called a fault. Run from the repository root
# (or .device/NAME) with the wheels installed (bench/gpu/common.sh use_wheels).
set -u
OUT=${OUT:-/tmp/gputui-health}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv > "$OUT/health_env.txt" 2>&1
python3 bench/gpu/health_probe.py "$OUT" > "$OUT/health_probe.log" 2>&1
echo "probe exit $?" >> "$OUT/health_probe.log"
