"""Subprocess children: real processes, real signals, exits noticed through pidfds."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap

import psutil
import pytest

from watchkeeper.supervise import (
    Backoff,
    ChildExited,
    ChildHeartbeat,
    ChildStarted,
    ExitReason,
    ManualClock,
    Restart,
    StartError,
    SupervisorBuilder,
    process_child,
)
from watchkeeper.supervise.testing import next_event

from ...support.waiting import wait_for_async

pytestmark = pytest.mark.anyio


NOTIFY = """
import os, signal, subprocess, sys, time
fd = int(os.environ["WATCHKEEPER_NOTIFY_FD"])
def say(line):
    os.write(fd, (line + "\\n").encode())
"""


def python(code: str, *, notify: bool = False) -> list[str]:
    return [sys.executable, "-c", (NOTIFY if notify else "") + textwrap.dedent(code)]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def wait_dead(pid: int) -> None:
    """Wait (on real events, not a verdict by sleeping) until ``pid`` is gone."""
    await wait_for_async(lambda: not alive(pid), what=f"process {pid} gone", timeout=10)


def tree() -> SupervisorBuilder:
    return SupervisorBuilder("procs").backoff(Backoff.none()).intensity(10, 5.0)


async def test_a_crashing_process_is_restarted_with_its_exit_status() -> None:
    sup = (
        tree().child(process_child("crash", python("import sys; sys.exit(3)"))).build(ManualClock())
    )
    sub = sup.subscribe()
    handle = await sup.start()
    exited = await next_event(sub, ChildExited)
    assert (exited.reason, exited.exit_code, exited.will_restart) == (ExitReason.ERROR, 3, True)
    assert (await next_event(sub, ChildStarted)).attempt == 1
    await handle.stop()


async def test_a_process_that_sigkills_itself_exits_as_killed() -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    spec = process_child("suicide", python(code), restart=Restart.TEMPORARY)
    sup = tree().child(spec).build(ManualClock())
    sub = sup.subscribe()
    handle = await sup.start()
    exited = await next_event(sub, ChildExited)
    assert exited.reason == ExitReason.KILLED
    assert exited.exit_code == -signal.SIGKILL
    assert "SIGKILL" in exited.detail
    assert not exited.will_restart
    await handle.stop()


async def test_a_sigkilled_child_is_replaced_by_a_new_live_process() -> None:
    sup = tree().child(process_child("sleeper", ["sleep", "3600"])).build(ManualClock())
    sub = sup.subscribe()
    handle = await sup.start()
    old_pid = (await next_event(sub, ChildStarted)).pid
    assert old_pid is not None
    os.kill(old_pid, signal.SIGKILL)
    exited = await next_event(sub, ChildExited)
    assert exited.reason == ExitReason.KILLED
    new = await next_event(sub, ChildStarted)
    assert new.pid is not None
    assert new.pid != old_pid
    assert alive(new.pid)
    assert handle.children()[0].pid == new.pid
    await handle.stop()
    await wait_dead(new.pid)


async def test_ready_and_status_lines_travel_over_the_notify_pipe_and_silence_is_a_hang() -> None:
    clock = ManualClock()
    code = "say('READY=1'); say('STATUS=loaded model'); time.sleep(3600)"
    spec = process_child(
        "agent", python(code, notify=True), notify=True, wait_ready=True, heartbeat_timeout_s=30.0
    )
    sup = tree().events(heartbeat_interval_s=0.0).child(spec).build(clock)
    sub = sup.subscribe()
    handle = await sup.start()  # returns only after READY=1
    pid = handle.children()[0].pid
    assert pid is not None
    beat = await next_event(sub, ChildHeartbeat)
    assert beat.step == "loaded model"
    clock.advance(30.0)
    exited = await next_event(sub, ChildExited)
    assert exited.reason == ExitReason.HUNG
    await wait_dead(pid)
    restarted = await next_event(sub, ChildStarted)
    assert restarted.pid != pid
    await handle.stop()


async def test_the_grandchild_left_behind_by_a_dying_leader_is_killed_with_it() -> None:
    # The leader dies at once on SIGTERM; its grandchild ignores SIGTERM and must not survive.
    code = """
    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; "
         "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"])
    say(f"STATUS={grandchild.pid}")
    say("READY=1")
    time.sleep(3600)
    """
    spec = process_child("tree", python(code, notify=True), notify=True, wait_ready=True)
    sup = tree().events(heartbeat_interval_s=0.0).child(spec).build(ManualClock())
    sub = sup.subscribe()
    handle = await sup.start()
    grandchild = int((await next_event(sub, ChildHeartbeat)).step or "0")
    leader = handle.children()[0].pid
    assert leader is not None
    assert alive(grandchild)
    await asyncio.wait_for(handle.stop(), 10)
    await wait_dead(leader)
    await wait_dead(grandchild)


async def test_a_tree_that_ignores_sigterm_is_sigkilled_after_the_shutdown_timeout() -> None:
    clock = ManualClock()
    code = """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the grandchild
    grandchild = subprocess.Popen(["sleep", "3600"])
    say(f"STATUS={grandchild.pid}")
    say("READY=1")
    time.sleep(3600)
    """
    spec = process_child(
        "stubborn", python(code, notify=True), notify=True, wait_ready=True, shutdown_timeout_s=5.0
    )
    sup = tree().events(heartbeat_interval_s=0.0).child(spec).build(clock)
    sub = sup.subscribe()
    handle = await sup.start()
    grandchild = int((await next_event(sub, ChildHeartbeat)).step or "0")
    leader = handle.children()[0].pid
    assert leader is not None
    stopping = asyncio.create_task(handle.stop())
    await clock.wait_for_timers()
    assert alive(leader)
    assert alive(grandchild)
    clock.advance(5.0)
    await asyncio.wait_for(stopping, 10)
    await wait_dead(leader)
    await wait_dead(grandchild)
    exited = await next_event(sub, ChildExited)
    assert exited.reason == ExitReason.SHUTDOWN


async def test_a_missing_program_fails_the_start() -> None:
    spec = process_child("ghost", ["/nonexistent/program"])
    with pytest.raises(StartError, match="ghost"):
        await tree().child(spec).build(ManualClock()).start()


async def test_env_and_cwd_reach_the_child(tmp_path: os.PathLike[str]) -> None:
    code = "say('STATUS=' + os.environ['GREETING'] + ' ' + os.getcwd()); time.sleep(3600)"
    spec = process_child(
        "env", python(code, notify=True), env={"GREETING": "hello"}, cwd=str(tmp_path), notify=True
    )
    sup = tree().events(heartbeat_interval_s=0.0).child(spec).build(ManualClock())
    sub = sup.subscribe()
    handle = await sup.start()
    beat = await next_event(sub, ChildHeartbeat)
    assert beat.step == f"hello {os.path.realpath(tmp_path)}"
    await handle.stop()
