"""The process kind feeds the supervisor: stalled, stuck, failed, slow; timeouts and log growth."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import Condition
from watchkeeper.judge import judge
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.process import ProcessAdapter
from watchkeeper.procs import identity, layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.records.procs import NewProc, ProcStatus
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.waiting import wait_for
from .conftest import kill_leftovers, wait_witness


@pytest.fixture
def timed(store: Store, tmp_path: Path, clock: ManualClock) -> ProcEngine:
    engine = ProcEngine(store, tmp_path / "data", clock=clock, grace_s=2.0)
    yield engine  # type: ignore[misc]
    kill_leftovers(engine)


def adapter(store: Store, tmp_path: Path, **config: object) -> ProcessAdapter:
    settings = make_settings(tmp_path, store.url)
    return ProcessAdapter(
        "process", KindConfig(adapter="process", **config), AdapterContext(settings, store)
    )  # type: ignore[arg-type]


def verdict(store: Store, tmp_path: Path, run_id: str, clock: ManualClock, **config: object):  # type: ignore[no-untyped-def]
    kind = adapter(store, tmp_path, **config)
    [view] = [v for v in kind.read(clock()) if v.run_id == run_id]
    return view, judge(view, kind.spec, clock())


def start(engine: ProcEngine, *argv: str, **options: object) -> str:
    request = LaunchRequest(argv=tuple(argv), detach=True, **options)  # type: ignore[arg-type]
    return engine.start(request).run.run_id


def test_alive_without_progress_past_its_budget_is_stalled(
    timed: ProcEngine, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    run_id = start(timed, "sleep", "120", budget_s=10)
    timed.sweep(clock.advance(5))
    view, found = verdict(store, tmp_path, run_id, clock)
    assert view.owner.alive is True and found is None
    timed.sweep(clock.advance(6))
    _, found = verdict(store, tmp_path, run_id, clock)
    assert found is not None and found.condition is Condition.STALLED


def test_log_growth_is_progress_and_moves_the_state_token(
    timed: ProcEngine, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    go = tmp_path / "go"
    script = f"while [ ! -f {go} ]; do sleep 0.02; done; echo moved; sleep 120"
    run_id = start(timed, "sh", "-c", script, budget_s=10)
    timed.sweep(clock.advance(1))  # the first look sets the baseline
    before = timed.get(run_id)
    go.touch()
    wait_for(lambda: layout.log_path(timed.data_dir, run_id).stat().st_size > 0)
    report = timed.sweep(clock.advance(9))
    assert report.reaped.progressed == [run_id]
    after = timed.get(run_id)
    assert after.progress_at == clock() and after.state_token != before.state_token
    clock.advance(5)
    _, found = verdict(store, tmp_path, run_id, clock)
    assert found is None  # 14 s after start, but only 5 s after the log grew


def test_gone_without_a_witness_is_stuck_and_a_failure_is_failed(
    timed: ProcEngine, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    import os
    import signal

    run_id = start(timed, "sleep", "120")
    run = timed.get(run_id)
    os.kill(run.shim_pid or 0, signal.SIGKILL)
    wait_for(lambda: identity.start_time(run.shim_pid or 0) is None)
    view, found = verdict(store, tmp_path, run_id, clock)
    assert view.owner.alive is False
    assert found is not None and found.condition is Condition.STUCK
    failing = start(timed, "sh", "-c", "exit 4")
    wait_witness(timed, timed.get(failing))
    _, found = verdict(store, tmp_path, failing, clock)  # judged by the witness, before the reaper
    assert found is not None and found.condition is Condition.FAILED
    assert found.reason == "exited with status 4"


def test_a_run_of_another_host_is_never_stuck_on_our_word(
    timed: ProcEngine, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    new = NewProc("p-elsewhere001", "far", ("x",), "/", "another-host", "me", "boot", True)
    timed.procs.register(new, clock())
    view, found = verdict(store, tmp_path, new.run_id, clock)
    assert view.owner.alive is None and found is None
    timed.sweep(clock.advance(3600))
    assert timed.get(new.run_id).status is ProcStatus.STARTING  # not ours to reclaim


def test_slow_when_past_the_expected_time(
    timed: ProcEngine, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    run_id = start(timed, "sleep", "120", budget_s=1000)
    clock.advance(61)
    _, found = verdict(store, tmp_path, run_id, clock, expected_s=60)
    assert found is not None and found.condition is Condition.SLOW


def test_a_run_past_its_timeout_is_aborted_and_failed(
    timed: ProcEngine, clock: ManualClock
) -> None:
    run_id = start(timed, "sleep", "120", timeout_s=30)
    timed.sweep(clock.advance(29))
    assert timed.get(run_id).status is ProcStatus.RUNNING
    report = timed.sweep(clock.advance(2))
    assert report.reaped.timed_out == [run_id]
    done = timed.get(run_id)
    assert done.status is ProcStatus.FAILED
    assert done.reason == "timed out after 30 s: killed by signal 15 (SIGTERM)"
