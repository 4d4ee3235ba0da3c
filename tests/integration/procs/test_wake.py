"""Park and wake: only the engine checks; the wake breaker holds a looping session."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.errors import NotFound
from watchkeeper.procs import identity
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.park import WAKE_LIMIT
from watchkeeper.records.procs import NewProc, ParkState, ProcStatus
from watchkeeper.store import Store


def ended_run(engine: ProcEngine, run_id: str) -> str:
    now = engine.clock()
    new = NewProc(run_id, run_id, ("true",), "/", identity.host(), "me", identity.boot_id(), True)
    engine.procs.register(new, now)
    engine.procs.finish(run_id, ProcStatus.SUCCEEDED, now, exit_code=0)
    return run_id


@pytest.fixture
def manual_engine(store: Store, tmp_path: Path, clock: ManualClock) -> ProcEngine:
    return ProcEngine(store, tmp_path / "data", clock=clock)


def test_a_parked_session_is_woken_once_when_its_run_ends(
    manual_engine: ProcEngine, clock: ManualClock, tmp_path: Path
) -> None:
    engine = manual_engine
    woke = tmp_path / "woke.txt"
    now = clock()
    new = NewProc("p-suite0000001", "suite", ("x",), "/", identity.host(), "me", None, True)
    engine.procs.register(new, now)
    engine.park(
        "agent-1", "waiting for suite", new.run_id, wake_cmd=f'echo "$WATCHKEEPER_RUN_ID" >> {woke}'
    )
    engine.sweep(clock.advance(1))
    [view] = engine.parked()
    assert (view.park.state, view.wakeable, view.run_status) == (
        ParkState.WAITING,
        False,
        "starting",
    )
    engine.procs.finish(new.run_id, ProcStatus.SUCCEEDED, clock(), exit_code=0)
    [view] = engine.parked()
    assert view.wakeable  # shown before the engine's next sweep wakes it
    engine.sweep(clock.advance(1))
    engine.sweep(clock.advance(1))
    assert woke.read_text().splitlines() == [new.run_id]
    [view] = engine.parked()
    assert view.park.state is ParkState.WOKEN
    assert view.park.woken_at == now + timedelta(seconds=2)


def test_the_wake_breaker_suppresses_a_session_that_makes_no_progress(
    manual_engine: ProcEngine, clock: ManualClock
) -> None:
    engine = manual_engine
    for attempt in range(WAKE_LIMIT + 1):
        run_id = ended_run(engine, f"p-loop{attempt:09d}")
        engine.park("looper", "waiting again", run_id)
        engine.sweep(clock.advance(1))
    states = [view.park.state for view in reversed(engine.parked())]
    assert states == [ParkState.WOKEN] * WAKE_LIMIT + [ParkState.SUPPRESSED]
    latest = engine.parked()[0].as_dict()
    assert latest["breaker_open"] is True
    assert latest["wakes_without_progress"] == WAKE_LIMIT
    assert "without progress" in latest["note"]
    engine.sweep(clock.advance(1))
    assert engine.parked()[0].park.state is ParkState.SUPPRESSED  # stays held
    # The session's own word releases nothing.
    assert engine.session_progress("looper", "fixed the failing test") == 0
    engine.sweep(clock.advance(1))
    assert engine.parked()[0].park.state is ParkState.SUPPRESSED
    # A run it waits on ends after the park: the engine saw work move and releases the held
    # park, but the session is woken once, for its newest park; the held one is superseded.
    new = NewProc("p-fix000000001", "fix", ("x",), "/", identity.host(), "me", None, True)
    engine.procs.register(new, clock())
    engine.park("looper", "waiting on the fix", new.run_id)
    engine.procs.finish(new.run_id, ProcStatus.SUCCEEDED, clock.advance(1), exit_code=0)
    engine.sweep(clock.advance(1))
    assert [view.park.state for view in engine.parked()[:2]] == [
        ParkState.WOKEN,
        ParkState.SUPERSEDED,
    ]
    assert engine.procs.session("looper").wakes_without_progress == 1


def test_a_progress_note_on_park_is_recorded_but_does_not_reset_the_breaker(
    manual_engine: ProcEngine, clock: ManualClock
) -> None:
    engine = manual_engine
    for attempt in range(WAKE_LIMIT + 2):
        run_id = ended_run(engine, f"p-work{attempt:09d}")
        engine.park("worker", "next step", run_id, progress=f"did step {attempt}")
        engine.sweep(clock.advance(1))
    states = [view.park.state for view in reversed(engine.parked())]
    assert states == [ParkState.WOKEN] * WAKE_LIMIT + [ParkState.SUPPRESSED] * 2
    assert engine.parked()[0].as_dict()["progress_note"] == f"did step {WAKE_LIMIT + 1}"


def test_parking_on_an_unknown_run_is_refused(manual_engine: ProcEngine) -> None:
    with pytest.raises(NotFound, match="no process run 'p-nothing' to wait on"):
        manual_engine.park("agent", "waiting", "p-nothing")
    assert manual_engine.parked() == []
