"""Watch one run on this machine as the dashboard does (the real Monitor,
NVML, diagnose() twice a second) and write every change of the banner's
word, timed from the run's last step, to a JSON-lines file; stop at the
first word whose title starts with --until (or after --timeout seconds).

    python3 bench/gpu/watch_words.py --session train --log RUN/train.log \
        --stale-after 10 --until "probably hung" --timeout 170 --out OUT/words.jsonl

The last line is a summary: {"summary": true, "first_word": {...},
"until": {...}, "wrong_before": [...]}: the first WARNING/ERROR word after
the last step, the --until word, and every WARNING/ERROR word before the
first one of `--right` kinds (default: held_but_idle, progress_stalled).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from gputui.diagnose import Thresholds, diagnose  # noqa: E402
from gputui.model import Severity  # noqa: E402
from gputui.monitor.engine import Monitor  # noqa: E402
from gputui.monitor.gpufeed import NvmlFeed  # noqa: E402
from gputui.remote.local import LocalTransport  # noqa: E402
from gputui.remote.target import Target  # noqa: E402


async def watch(args: argparse.Namespace) -> dict[str, object]:
    settings = SimpleNamespace(
        interval=1.0,
        session=args.session,
        log=args.log,
        gpu_source="nvml",
        metric_regexes=[],
        local=True,
        run=None,
    )
    tr = LocalTransport()
    await tr.connect()
    mon = Monitor(Target(tr, None), settings, NvmlFeed(period_s=1.0))  # type: ignore[arg-type]
    right = set(args.right.split(","))
    out = Path(args.out).open("a")  # noqa: SIM115 (closed after the loop)
    first: dict[str, object] | None = None
    until: dict[str, object] | None = None
    wrong: list[dict[str, object]] = []
    last = ""
    await mon.start()
    t_end = time.time() + args.timeout
    try:
        while time.time() < t_end:
            await asyncio.sleep(0.5)
            now = time.time()
            snap = mon.snapshot
            fs = [
                f
                for f in diagnose(snap, now, Thresholds(stale_after=args.stale_after))
                if f.severity != Severity.INFO
            ]
            step_t = snap.metrics.last_step_time
            rec: dict[str, object] = {
                "t": round(now, 2),
                "last_step": snap.metrics.last_step,
                "since_last_step": None if step_t is None else round(now - step_t, 1),
                "kind": fs[0].kind if fs else "",
                "severity": fs[0].severity.value if fs else "",
                "word": fs[0].title if fs else "",
            }
            if rec["word"] != last:
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(json.dumps(rec), flush=True)
                last = str(rec["word"])
            if not fs:
                continue
            if first is None and fs[0].kind in right and step_t is not None:
                first = rec
            elif first is None and (not wrong or wrong[-1]["word"] != rec["word"]):
                wrong.append(rec)  # each wrong word once, when it first shows
            if any(f.title.startswith(args.until) for f in fs):
                until = rec
                break
    finally:
        await mon.stop()
        await tr.close()
    summary: dict[str, object] = {
        "summary": True,
        "first_word": first,
        "until": until,
        "wrong_before": wrong,
    }
    out.write(json.dumps(summary) + "\n")
    out.close()
    return summary


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--session", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--stale-after", type=float, default=10.0)
    ap.add_argument("--until", default="probably hung")
    ap.add_argument("--right", default="held_but_idle,progress_stalled")
    ap.add_argument("--timeout", type=float, default=170.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    summary = asyncio.run(watch(args))
    print(json.dumps(summary), flush=True)
    return 0 if summary["until"] else 1


if __name__ == "__main__":
    sys.exit(main())
