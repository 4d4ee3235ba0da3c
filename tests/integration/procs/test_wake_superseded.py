"""Releasing a held session wakes it once, for its newest park; older parks are superseded.

A session held by the wake breaker may have parked several times meanwhile. When the
engine sees the work move, those parks are released together: waking the session once
per park would run its wake command over and over in one sweep, each for a run it has
long moved past. It is woken once, for the newest of them, and the older ones say they
were superseded (in ``parked`` and the API) rather than wait for ever or fire late.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.procs import identity
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.park import WAKE_LIMIT
from watchkeeper.records.procs import NewProc, ParkState, ProcStatus
from watchkeeper.store import Store

SESSION = "looper"


@pytest.fixture
def engine(store: Store, tmp_path: Path, clock: ManualClock) -> ProcEngine:
    return ProcEngine(store, tmp_path / "data", clock=clock)


def registered(engine: ProcEngine, run_id: str) -> str:
    new = NewProc(run_id, run_id, ("x",), "/", identity.host(), "me", None, True)
    engine.procs.register(new, engine.clock())
    return run_id


def ended(engine: ProcEngine, run_id: str) -> str:
    engine.procs.finish(registered(engine, run_id), ProcStatus.SUCCEEDED, engine.clock())
    return run_id


def test_a_release_wakes_the_session_once_for_its_newest_park(
    engine: ProcEngine, clock: ManualClock, tmp_path: Path
) -> None:
    woke = tmp_path / "woke.txt"
    wake = f'echo "$WATCHKEEPER_RUN_ID" >> {woke}'
    # Woken as often as the breaker allows without progress.
    for attempt in range(WAKE_LIMIT):
        engine.park(SESSION, "again", ended(engine, f"p-loop{attempt:08d}"), wake_cmd=wake)
        engine.sweep(clock.advance(1))
    assert len(woke.read_text().splitlines()) == WAKE_LIMIT
    woke.unlink()
    # Held: three more parks on finished work wake nobody.
    held = [ended(engine, f"p-held{attempt:08d}") for attempt in range(3)]
    for run_id in held:
        engine.park(SESSION, "still waiting", run_id, wake_cmd=wake)
        engine.sweep(clock.advance(1))
    assert not woke.exists()
    # Then it parks on real work, which ends after the park: the engine sees work move.
    build = registered(engine, "p-build0000001")
    engine.park(SESSION, "waiting on the build", build, wake_cmd=wake)
    engine.sweep(clock.advance(1))
    engine.procs.finish(build, ProcStatus.SUCCEEDED, clock.advance(1), exit_code=0)
    engine.sweep(clock.advance(1))

    assert woke.read_text().splitlines() == [build]  # one wake, for the newest park
    by_run = {view.park.until_run: view for view in engine.parked()}
    assert by_run[build].park.state is ParkState.WOKEN
    for run_id in held:
        shown = by_run[run_id].as_dict()
        assert shown["state"] == "superseded", shown
        assert shown["wakeable"] is False
        assert f"park {by_run[build].park.id}" in shown["note"], shown["note"]
    assert engine.procs.session(SESSION).wakes_without_progress == 1
    # Nothing superseded fires later either.
    engine.sweep(clock.advance(1))
    assert woke.read_text().splitlines() == [build]


def test_parks_of_other_sessions_are_not_superseded(
    engine: ProcEngine, clock: ManualClock, tmp_path: Path
) -> None:
    woke = tmp_path / "woke.txt"
    wake = f'echo "$WATCHKEEPER_SESSION_ID" >> {woke}'
    engine.park("first", "waiting", ended(engine, "p-first0000001"), wake_cmd=wake)
    engine.park("second", "waiting", ended(engine, "p-second000001"), wake_cmd=wake)
    engine.sweep(clock.advance(1))
    assert sorted(woke.read_text().splitlines()) == ["first", "second"]
    assert {view.park.state for view in engine.parked()} == {ParkState.WOKEN}
