"""Process children's stop signal, start time, normal exit codes and captured output."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from watchkeeper.supervise import (
    Backoff,
    ChildExited,
    ChildStarted,
    ExitReason,
    ManualClock,
    Restart,
    SupervisorBuilder,
    process_child,
)
from watchkeeper.supervise.testing import next_event

from ...support.waiting import wait_for_async

pytestmark = pytest.mark.anyio


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def tree() -> SupervisorBuilder:
    return SupervisorBuilder("procs").backoff(Backoff.none()).intensity(10, 5.0)


async def test_stop_sends_the_stop_signal_given(tmp_path: Path) -> None:
    said = tmp_path / "said"
    code = f"""
        import signal, sys, time
        def on_int(*_):
            open({str(said)!r}, "w").write("SIGINT")
            sys.exit(0)
        signal.signal(signal.SIGINT, on_int)
        open({str(said)!r} + ".up", "w").close()
        time.sleep(60)
    """
    spec = process_child("w", python(code), stop_signal=signal.SIGINT)
    handle = await tree().child(spec).build(ManualClock()).start()
    await wait_for_async(lambda: Path(f"{said}.up").exists(), what="the child up")
    await handle.stop()
    assert said.read_text() == "SIGINT"


async def test_an_exit_before_ready_after_s_is_a_failed_start_even_with_status_0() -> None:
    spec = process_child(
        "quick", python("pass"), ready_after_s=3.0, wait_ready=True, restart=Restart.TRANSIENT
    )
    sup = tree().start_in_background().child(spec).build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    exited = await next_event(events, ChildExited)
    assert (exited.reason, exited.exit_code, exited.will_restart) == (
        ExitReason.START_FAILED,
        0,
        True,  # transient: a failed start is abnormal, so it is restarted
    )
    assert "before it had run 3 s" in exited.detail
    await handle.stop()


async def test_a_child_is_running_once_it_has_run_ready_after_s_on_the_clock(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    spec = process_child(
        "slow", python("import time; time.sleep(60)"), ready_after_s=2.0, wait_ready=True
    )
    sup = tree().start_in_background().child(spec).build(clock)
    events = sup.subscribe()
    handle = await sup.start()
    await next_event(events, ChildStarted)
    assert [c.state for c in handle.children()] == ["starting"]
    clock.advance(2.0)
    await wait_for_async(lambda: [c.state for c in handle.children()] == ["running"])
    await handle.stop()


async def test_a_status_listed_as_normal_is_a_normal_exit() -> None:
    spec = process_child(
        "done",
        python("import sys; sys.exit(3)"),
        normal_exit_codes=frozenset({0, 3}),
        restart=Restart.TRANSIENT,
    )
    sup = tree().child(spec).build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    exited = await next_event(events, ChildExited)
    assert (exited.reason, exited.exit_code, exited.will_restart) == (ExitReason.NORMAL, 3, False)
    await handle.stop()


async def test_output_goes_to_the_descriptor_given_at_each_launch(tmp_path: Path) -> None:
    log = tmp_path / "out.log"

    def output() -> int:
        return os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    code = "import sys; print('to stdout', flush=True); print('to stderr', file=sys.stderr)"
    spec = process_child("talk", python(code), output=output, restart=Restart.TEMPORARY)
    sup = tree().child(spec).build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    await next_event(events, ChildExited)
    assert log.read_text().splitlines() == ["to stdout", "to stderr"]
    await handle.stop()
