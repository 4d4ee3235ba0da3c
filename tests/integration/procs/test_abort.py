"""Abort: all three outcomes, with real process groups and a recycled pid simulated."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from watchkeeper.clock import utcnow
from watchkeeper.errors import NotFound
from watchkeeper.procs import identity
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import AbortOutcome, NewProc, ProcStatus, Started

from ...support.waiting import wait_for
from .conftest import gone, start_detached, wait_witness


def test_abort_signals_the_group_and_nothing_is_left_orphaned(
    engine: ProcEngine, tmp_path: Path
) -> None:
    grandchild_file = tmp_path / "grandchild.pid"
    run = start_detached(
        engine, "sh", "-c", f"sleep 300 & echo $! > {grandchild_file}; wait", cwd=str(tmp_path)
    )
    wait_for(lambda: grandchild_file.exists() and grandchild_file.read_text().strip())
    grandchild = int(grandchild_file.read_text())
    assert identity.start_time(grandchild) is not None
    result = engine.abort(run.run_id)
    assert result.outcome is AbortOutcome.SIGNALED
    assert result.run.status is ProcStatus.CANCELLED
    assert result.run.signal == 15
    assert result.run.reason == "aborted on request: killed by signal 15 (SIGTERM)"
    wait_for(lambda: gone(grandchild))


def test_abort_sigkills_a_group_that_ignores_sigterm(engine: ProcEngine, tmp_path: Path) -> None:
    ignoring = tmp_path / "ignoring"
    run = start_detached(
        engine, "sh", "-c", f"trap '' TERM; touch {ignoring}; while :; do sleep 1; done"
    )
    # Signalled before the trap is set, the group would die of SIGTERM: wait for the trap.
    wait_for(ignoring.exists, what="the command ignoring SIGTERM")
    result = engine.abort(run.run_id, grace_s=0.2)
    assert result.outcome is AbortOutcome.SIGNALED
    assert result.run.signal == 9


def test_abort_of_a_run_that_already_exited_updates_the_record(engine: ProcEngine) -> None:
    run = start_detached(engine, "true")
    wait_witness(engine, run)
    assert engine.get(run.run_id).status is ProcStatus.RUNNING  # nobody has read the witness
    result = engine.abort(run.run_id)
    assert result.outcome is AbortOutcome.ALREADY_EXITED
    assert result.run.status is ProcStatus.SUCCEEDED
    again = engine.abort(run.run_id)
    assert again.outcome is AbortOutcome.ALREADY_EXITED


def test_abort_of_a_recycled_pid_signals_nothing(engine: ProcEngine) -> None:
    # A record whose pids now belong to an unrelated live process: the pid was recycled.
    unrelated = subprocess.Popen(["sleep", "120"])
    try:
        now = utcnow()
        new = NewProc(
            "p-recycled0001",
            "old",
            ("sleep", "1"),
            "/",
            identity.host(),
            "me",
            identity.boot_id(),
            detach=True,
        )
        engine.procs.register(new, now)
        engine.procs.mark_started(
            new.run_id, Started(unrelated.pid, "t1", unrelated.pid, "t1", unrelated.pid), now
        )
        assert engine.effective_status(engine.get(new.run_id)) == "stale"
        result = engine.abort(new.run_id)
        assert result.outcome is AbortOutcome.NOT_OURS
        assert unrelated.poll() is None  # still running: nothing was signaled
        assert result.run.status is ProcStatus.FAILED
        assert result.run.reason is not None and "belongs to another process" in result.run.reason
    finally:
        unrelated.kill()
        unrelated.wait()


def test_abort_of_an_unknown_run_says_so(engine: ProcEngine) -> None:
    with pytest.raises(NotFound, match="no process run 'p-missing'"):
        engine.abort("p-missing")
