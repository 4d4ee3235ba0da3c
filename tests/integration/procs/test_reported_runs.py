"""A server's record of a run another host's engine reports: judged by what that engine says.

The server never sees such a run's processes or witness: the engine on the run's host
reports its owner, its output and its end, and says at least every few seconds that it
is still there. The sweep's read model judges the record like any process run: stalled
when output stops for the budget, stuck when the reporting engine falls silent, failed
by the end it reports.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper import Client
from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import Condition, OwnerKind
from watchkeeper.errors import Conflict
from watchkeeper.judge import judge
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.process import ProcessAdapter
from watchkeeper.procs import layout, reported
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.procs.mirror import REPORT_LEASE_S, Ended, Report
from watchkeeper.records.procs import NewProc, ProcStatus, Started
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.live_server import live_server
from ...support.waiting import wait_for
from .conftest import kill_leftovers

ELSEWHERE = "build-host-7:/home/ci/.local/state/watchkeeper/servers/x"
OWNER = Started(shim_pid=4242, shim_start="t100", pid=4243, pid_start="t101", pgid=4243)


@pytest.fixture
def server(store: Store, tmp_path: Path, clock: ManualClock) -> ProcEngine:
    engine = ProcEngine(store, tmp_path / "data", clock=clock, grace_s=2.0)
    yield engine  # type: ignore[misc]
    kill_leftovers(engine)


def recorded(server: ProcEngine, run_id: str = "p-0123456789ab", budget_s: float = 60) -> str:
    new = NewProc(
        run_id, "build", ("make",), "/src", "build-host-7", "ci", None, True, budget_s=budget_s
    )
    server.record_reported(new, ELSEWHERE)
    return run_id


def judged(store: Store, tmp_path: Path, run_id: str, clock: ManualClock):  # type: ignore[no-untyped-def]
    settings = make_settings(tmp_path, store.url)
    context = AdapterContext(settings, store)  # type: ignore[arg-type]
    kind = ProcessAdapter("process", KindConfig(adapter="process"), context)
    [view] = [v for v in kind.read(clock()) if v.run_id == run_id]
    return view, judge(view, kind.spec, clock())


def test_output_is_progress_silence_past_the_budget_is_stalled(
    server: ProcEngine, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    run_id = recorded(server)
    server.take_report(run_id, Report(ELSEWHERE, started=OWNER))
    view, verdict = judged(store, tmp_path, run_id, clock)
    assert view.owner.kind is OwnerKind.LEASE and view.owner.alive is True
    assert verdict is None
    clock.advance(50)
    run, size = server.take_report(run_id, Report(ELSEWHERE, output=(0, b"compiling\n")))
    assert size == len(b"compiling\n") and run.progress_at == clock()
    assert layout.log_path(server.data_dir, run_id).read_bytes() == b"compiling\n"
    # The engine keeps saying it is there, with nothing new: past the budget, stalled.
    for _ in range(4):
        clock.advance(20)
        server.take_report(run_id, Report(ELSEWHERE))
    view, verdict = judged(store, tmp_path, run_id, clock)
    assert view.owner.alive is True
    assert verdict is not None and verdict.condition is Condition.STALLED


def test_a_silent_reporter_makes_the_run_stuck_and_its_end_settles_it(
    server: ProcEngine, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    run_id = recorded(server, budget_s=3600)
    server.take_report(run_id, Report(ELSEWHERE, started=OWNER))
    clock.advance(REPORT_LEASE_S + 1)
    view, verdict = judged(store, tmp_path, run_id, clock)
    assert view.owner.alive is False
    assert verdict is not None and verdict.condition is Condition.STUCK
    assert server.describe(server.get(run_id))["effective_status"] == "stale"
    ended = Ended(ProcStatus.FAILED, 2, None, "exited with status 2", clock())
    server.take_report(run_id, Report(ELSEWHERE, ended=ended))
    view, verdict = judged(store, tmp_path, run_id, clock)
    assert verdict is not None and verdict.condition is Condition.FAILED
    assert server.get(run_id).exit_code == 2


def test_output_sent_twice_is_kept_once_and_a_gap_is_asked_again(
    server: ProcEngine, clock: ManualClock
) -> None:
    run_id = recorded(server)
    assert server.take_report(run_id, Report(ELSEWHERE, output=(0, b"one\n")))[1] == 4
    assert server.take_report(run_id, Report(ELSEWHERE, output=(0, b"one\ntwo\n")))[1] == 8
    assert server.take_report(run_id, Report(ELSEWHERE, output=(20, b"later\n")))[1] == 8
    assert layout.log_path(server.data_dir, run_id).read_bytes() == b"one\ntwo\n"


def test_only_the_engine_that_recorded_a_run_reports_it(
    server: ProcEngine, clock: ManualClock
) -> None:
    run_id = recorded(server)
    with pytest.raises(Conflict, match="reported by another engine"):
        server.take_report(run_id, Report("somebody-else:/tmp", started=OWNER))
    own = server.start(LaunchRequest(("sleep", "60"), detach=True)).run.run_id
    with pytest.raises(Conflict, match="this server's own engine"):
        server.take_report(own, Report(ELSEWHERE, ended=None))
    recorded_again = NewProc(own, "x", ("x",), "/", "h", "u", None, True)
    with pytest.raises(Conflict, match="recorded already"):
        server.record_reported(recorded_again, ELSEWHERE)
    # The same run recorded again by its own engine (a lost answer) is taken as it is.
    again = NewProc(run_id, "build", ("make",), "/src", "build-host-7", "ci", None, True)
    assert server.record_reported(again, ELSEWHERE).run_id == run_id


def test_a_host_reports_its_runs_until_the_server_has_each_end(
    runtime: Runtime, tmp_path: Path
) -> None:
    here = reported.open_engine(tmp_path / "this-host")
    try:
        with live_server(runtime) as live, Client(live.url, live.tokens["reporter"]) as client:
            reporter = reported.Reporter(client, here)
            script = LaunchRequest(("sh", "-c", "echo one; echo two; exit 4"), detach=True)
            run_id = here.start(script, announce=reporter.announce).run.run_id
            # Recorded here only (as when the server never answered): nothing to report it to.
            unknown = here.start(LaunchRequest(("true",), detach=True)).run.run_id

            def settled() -> bool:
                left = reporter.pass_over()
                return left.active == 0 and left.unreported == 0 and left.error is None

            wait_for(settled, what="every run reported or marked")
        there = runtime.procs.get(run_id)
        assert there.reported and (there.status, there.exit_code) == (ProcStatus.FAILED, 4)
        assert layout.log_path(runtime.procs.data_dir, run_id).read_bytes() == b"one\ntwo\n"
        mark = layout.run_dir(here.data_dir, unknown) / reported.REPORTED_MARK
        assert "not reported: no process run" in mark.read_text()
    finally:
        kill_leftovers(here)
        here.close()
