"""A run that died of a write that found no room (`out_of_space`). Pure.

"No space left on device" ([Errno 28], safetensors' StorageFull) or "Disk
quota exceeded" ([Errno 122]) ending the output of a run that is gone: the
run died of it, whether or not the log's disk has room now — it was
another file system (a checkpoint directory, /tmp, a dataset cache), or
the space was freed since (a checkpoint that failed half-written is
removed, the user cleaned up). host.py's disk rules judge the log's own
disk by its free space; this one names the death. /dev/shm's "No space
left" is the DataLoader's (failures.py's shm_exhausted)."""

from __future__ import annotations

import re

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import last_error_line, short
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity
from gputui.text.untrusted import one_line
from gputui.text.words import size_words

_NO_ROOM = re.compile(
    r"No space left on device|\[Errno 28\]|\bENOSPC\b|StorageFull"
    r"|Disk quota exceeded|\[Errno 122\]|\bEDQUOT\b"
)
_PATH = re.compile(r"'(/[^']+)'|\"(/[^\"]+)\"")


@rule(
    Kind(
        "out_of_space",
        specificity=61,
        cause="disk",
        stage=2,
        alerts=True,
        host_word="dead",
        # the death's cause, where they quote its last line
        supersedes=("run_exited", "session_dead"),
    )
)
def rule_out_of_space(ctx: Context) -> Finding | None:
    """The run is gone and its output's last error is a write that found
    no room (or hit a quota): said so, with what the log's disk has now."""
    if not ctx.ct_usable or not ctx.run_gone:
        return None
    pane, log = list(ctx.snap.pane_tail or []), list(ctx.snap.log_tail or [])
    error = last_error_line(log) or last_error_line(pane)
    if error is None or "</torch_" in error or _NO_ROOM.search(error) is None:
        return None
    quota = "quota" in error.lower() or "122" in error
    what = "a disk quota was exceeded" if quota else "a write found no space left on the device"
    ev = [f"its last error: {short(one_line(error, 400), 300)}"]
    path = _PATH.search(error)
    if path is not None:
        ev.append(f"the file: {path.group(1) or path.group(2)}")
    free, total = ctx.log.fs_free, ctx.log.fs_total
    now = ""
    if free is not None and ctx.log.path:
        of = f" of {size_words(total)}" if total else ""
        ev.append(f"the file system holding {ctx.log.path}: {size_words(free)} free{of} now")
        if free >= ctx.th.disk_full_below_mib * 1024 * 1024:
            now = (
                f" ({size_words(free)} free on the log's disk now: freed since, or another "
                "file system — a checkpoint directory, /tmp, a cache)"
            )
    name = ctx.snap.session_name or "the run"
    return Finding(
        kind="out_of_space",
        severity=Severity.ERROR,
        title=f"the run in session {name} died: {what}{now}",
        evidence=ev,
        action="relaunch",
        action_label="relaunch",
        fix=(
            "see where it wrote (its checkpoint/output directory, TMPDIR, the HF cache) and "
            f"how full each is: `{ctx.in_ct('df -h')}`; free space (old checkpoints: "
            "save_total_limit) or point the output at a larger disk, then relaunch"
            + ("; a quota: `quota -s`, or ask for a larger one" if quota else "")
        ),
    )
