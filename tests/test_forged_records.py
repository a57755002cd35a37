"""The run cannot steer root through a record it forges (issue 34, item 1).

In a CT of the test bed, uid 65534 owns a tmux server and its session
`train`. The first pane's process renames itself (argv[0], which tmux
prints as `pane_current_command`) to a text holding the separators of
gputui's list-panes format and a whole record of its own: a session `main`
whose pane is root's `sleep`. A second case brings its own `tmux` (a user
owns the server, and so everything it answers): its answer names root's
process as the pane. Either way root's `sleep` must be alive after the kill
path, and nothing names it. Real tmux, real processes, the stand-in pct.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import pytest

import helpers
import test_run_owner
from gputui.actions import execute, plan_dump, plan_flush, plan_kill
from gputui.actions.plan import ActionError
from gputui.collect import tmux as tmux_parse
from gputui.config import Settings
from gputui.remote.target import Target
from test_run_owner import DROP, Owned

owned, target = test_run_owner.owned, test_run_owner.target  # the fixtures
facts = test_run_owner.facts
US, RS = tmux_parse.FIELD_SEP, tmux_parse.RECORD_END
# tmux 3.3a prints argv[0] up to its first space, after its last '/': the
# forged record has neither; the pane's real path becomes its last field.
FORGE = """\
import os, sys
victim = sys.argv[1]
fields = ["main", "1", "0", "0", "0", "0", victim, "0", "", "", "", "sleep"]
os.execv("/bin/sleep", ["x" + chr(0x1E) + chr(10) + chr(0x1F).join(fields), "600"])
"""


def root_victim(testbed: Any, ct: int) -> int:
    """Root's own process in the CT: a Python sleeping 4321 s, in a process group of its own."""
    run = "setsid python3 -c 'import time; time.sleep(4321)' >/dev/null 2>&1 & echo $!"
    r = testbed.ct_exec(ct, ["sh", "-c", run])
    pid = int(r.stdout.strip())
    helpers.wait_for(lambda: ct_alive(testbed, ct, pid), 10, "root's sleep")
    return pid


def ct_alive(testbed: Any, ct: int, pid: int) -> bool:
    r = testbed.ct_exec(ct, ["sh", "-c", 'cat "/proc/$1/stat" 2>/dev/null', "sh", str(pid)])
    return bool(r.stdout) and r.stdout.rsplit(") ", 1)[1][0] != "Z"


def start_train(testbed: Any, o: Owned, victim: int) -> None:
    """Session `train` of uid 65534: window 0 forges, window 1 is the run."""
    (o.dir / "forge.py").write_text(FORGE)
    os.chown(o.dir / "forge.py", 65534, 65534)
    env = ["env", f"HOME={o.dir}", "SHELL=/bin/sh"]
    first = f"exec {o.python} forge.py {victim}"
    new = ["new-session", "-d", "-s", "train", "-c", str(o.dir), first]
    r = testbed.ct_exec(o.ct, [*DROP, *env, *o.tmux, *new])
    assert r.returncode == 0, r.stderr
    r = testbed.ct_exec(
        o.ct, [*DROP, *env, *o.tmux, "new-window", "-d", "-t", "=train", "sleep 601"]
    )
    assert r.returncode == 0, r.stderr

    def forged() -> bool:
        fmt = ["list-panes", "-a", "-F", "#{pane_current_command}"]
        out = testbed.ct_exec(o.ct, [*DROP, *o.tmux, *fmt]).stdout
        return RS in out

    try:
        helpers.wait_for(forged, 10, "the forging pane's argv[0]")
    except AssertionError:
        fmt = ["list-panes", "-a", "-F", "#{pane_dead} #{pane_current_command}"]
        raise AssertionError(testbed.ct_exec(o.ct, [*DROP, *o.tmux, *fmt])) from None


async def test_a_forged_pane_record_never_moves_kill_onto_roots_process(
    target: Target, testbed: Any, owned: Owned, facts: Any
) -> None:
    """By commands, and in one request to the agent (actions/facts.py: it
    reads every pane record naming the session; the planner uses its facts
    only for the pane its own parser takes)."""
    victim = root_victim(testbed, owned.ct)
    start_train(testbed, owned, victim)
    try:
        plan = await plan_kill(
            target, Settings(), "train", force=True, tmux=owned.tmux, facts=facts
        )
        assert victim not in plan.pids, plan.notes
        assert f"pid {victim} " not in "\n".join(plan.notes)
        result = await execute(target, plan)
        assert result.ok, result.summary
    except ActionError:
        pass  # refusing is fine too; what matters is root's process
    finally:
        still = ct_alive(testbed, owned.ct, victim)
        testbed.ct_exec(owned.ct, ["kill", "-9", str(victim)])
    assert still, "root's sleep was killed through a record the run forged"


FAKE_TMUX = f"""#!/bin/sh
# A tmux of the user's: every answer names root's process as the pane of `train`.
printf 'train{US}1{US}0{US}0{US}0{US}0{US}%s{US}0{US}{US}{US}python3{US}python3{US}/{US}/{RS}\\n' "$VICTIM"
"""


async def test_another_users_tmux_is_not_believed_about_whose_process_its_pane_is(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """The user owns the server: whatever it answers, root signals only
    processes of that user — refused in one line, root's sleep alive."""
    victim = root_victim(testbed, owned.ct)
    start_train(testbed, owned, victim)
    fake = owned.dir / "bin" / "tmux"
    fake.parent.mkdir()
    fake.write_text(FAKE_TMUX.replace("$VICTIM", str(victim)))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.chown(fake, 65534, 65534)
    try:
        tmux = [str(fake), "-S", owned.sock]
        for plan in (plan_kill, plan_dump, plan_flush):  # each acts on the pane's processes
            with pytest.raises(ActionError) as err:
                await plan(target, Settings(), "train", tmux=tmux)
            said = str(err.value)
            assert f"pid {victim} of uid 0" in said and "nothing was done" in said, plan
            assert "\n" not in said
    finally:
        still = ct_alive(testbed, owned.ct, victim)
        testbed.ct_exec(owned.ct, ["kill", "-9", str(victim)])
    assert still
