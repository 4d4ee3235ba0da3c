"""The whole incident lifecycle, on SQLite and PostgreSQL, with an injected clock."""

from __future__ import annotations

from watchkeeper.clock import ManualClock
from watchkeeper.runtime import Runtime
from watchkeeper.store.incidents import IncidentStatus

from .helpers import reports_for, start, sweep


def live(runtime: Runtime) -> list[tuple[str, str, str]]:
    return sorted(
        (i.key.run_id, i.key.condition, i.status.value)
        for i in runtime.store.incidents.list("live")
    )


def test_stalled_opens_once_moves_again_once_and_resolves_on_finish(
    runtime: Runtime, clock: ManualClock
) -> None:
    reports = reports_for(runtime)
    start(runtime, "c1", budget_s=60, lease_s=3600)
    sweep(runtime)
    assert live(runtime) == []

    clock.advance(61)
    first = sweep(runtime)
    assert len(first.applied.opened) == 1
    clock.advance(30)
    again = sweep(runtime)
    assert again.applied.opened == () and again.applied.reopened == ()
    assert live(runtime) == [("c1", "stalled", "open")]

    reports.progress("crawl", "c1", "page 4", None)
    moved = sweep(runtime)
    assert len(moved.applied.recovered) == 1
    assert sweep(runtime).applied.recovered == ()
    assert live(runtime) == [("c1", "stalled", "recovered")]

    incident = runtime.store.incidents.get(first.applied.opened[0])
    assert [e.type for e in incident.events] == ["opened", "moved_again"]
    assert incident.events[1].detail == "moved again: page 4"

    reports.finish("crawl", "c1")
    ended = sweep(runtime)
    assert ended.applied.resolved == first.applied.opened
    resolved = runtime.store.incidents.get(first.applied.opened[0])
    assert resolved.status is IncidentStatus.RESOLVED
    assert resolved.resolution == "the work ended: succeeded"
    assert live(runtime) == []


def test_stalling_again_reopens_the_same_incident(runtime: Runtime, clock: ManualClock) -> None:
    reports = reports_for(runtime)
    start(runtime, "c2", budget_s=60, lease_s=3600)
    clock.advance(61)
    opened = sweep(runtime).applied.opened
    reports.progress("crawl", "c2", None, None)
    sweep(runtime)
    clock.advance(61)
    reopened = sweep(runtime).applied.reopened
    assert reopened == opened
    incident = runtime.store.incidents.get(opened[0])
    assert incident.episodes == 2
    assert incident.status is IncidentStatus.OPEN
    assert [e.type for e in incident.events] == ["opened", "moved_again", "reopened"]


def test_heartbeat_is_not_progress(runtime: Runtime, clock: ManualClock) -> None:
    reports = reports_for(runtime)
    start(runtime, "c3", budget_s=60, lease_s=30)
    for _ in range(4):
        clock.advance(20)
        reports.heartbeat("crawl", "c3")
    result = sweep(runtime)
    assert len(result.applied.opened) == 1
    assert live(runtime) == [("c3", "stalled", "open")]


def test_lapsed_lease_makes_running_work_stuck(runtime: Runtime, clock: ManualClock) -> None:
    start(runtime, "c4", budget_s=600, lease_s=30)
    clock.advance(31)
    sweep(runtime)
    assert live(runtime) == [("c4", "stuck", "open")]
    incident = runtime.store.incidents.list("live")[0]
    assert "lease" in incident.reason


def test_stalled_turning_stuck_resolves_one_and_opens_the_other(
    runtime: Runtime, clock: ManualClock
) -> None:
    reports = reports_for(runtime)
    start(runtime, "c5", budget_s=60, lease_s=100)
    clock.advance(70)
    reports.heartbeat("crawl", "c5")
    sweep(runtime)
    assert live(runtime) == [("c5", "stalled", "open")]
    clock.advance(101)
    sweep(runtime)
    assert live(runtime) == [("c5", "stuck", "open")]
    resolved = runtime.store.incidents.list("resolved")
    assert [i.resolution for i in resolved] == ["the work is now stuck"]


def test_a_new_failure_fingerprint_opens_a_new_incident(
    runtime: Runtime, clock: ManualClock
) -> None:
    reports = reports_for(runtime)
    start(runtime, "c6")
    reports.fail("crawl", "c6", "DNS lookup failed for host 10.0.0.7", None, None)
    first = sweep(runtime).applied.opened
    assert len(first) == 1
    assert sweep(runtime).applied.opened == ()

    # Retried: the failed incident resolves because the work started again.
    start(runtime, "c6")
    clock.advance(1)
    assert sweep(runtime).applied.resolved == first

    # Same failure again (numbers differ): same fingerprint, the same incident reopens.
    reports.fail("crawl", "c6", "DNS lookup failed for host 10.0.0.9", None, None)
    assert sweep(runtime).applied.reopened == first

    start(runtime, "c6")
    sweep(runtime)
    reports.fail("crawl", "c6", "disk full", "ENOSPC", None)
    second = sweep(runtime)
    assert len(second.applied.opened) == 1
    assert second.applied.opened != first
    keys = {(i.key.condition, i.key.fingerprint) for i in runtime.store.incidents.list()}
    assert ("failed", "ENOSPC") in keys
    assert len(keys) == 2


def test_waiting_work_never_stalls(runtime: Runtime, clock: ManualClock) -> None:
    reports = reports_for(runtime)
    start(runtime, "c7", budget_s=60, lease_s=30)
    reports.waiting("crawl", "c7", "approve the plan")
    clock.advance(10_000)
    sweep(runtime)
    assert live(runtime) == []


def test_slow_is_shown_in_the_overview_but_opens_nothing(
    runtime: Runtime, clock: ManualClock
) -> None:
    import asyncio

    reports = reports_for(runtime)
    start(runtime, "c8", budget_s=60, lease_s=3600, expected_s=100)
    for _ in range(3):
        clock.advance(50)
        reports.progress("crawl", "c8", None, None)
    sweep(runtime)
    assert live(runtime) == []
    overview = asyncio.run(runtime.overview(include_finished=False))
    assert [j.verdict.condition.value for j in overview.running if j.verdict] == ["slow"]
    assert overview.attention == ()


def test_sweep_records_its_heartbeat(runtime: Runtime, clock: ManualClock) -> None:
    start(runtime, "c9")
    sweep(runtime)
    beats = runtime.store.heartbeats.all()
    assert len(beats) == 1
    assert beats[0].last_sweep_at == clock()
    assert beats[0].runs == 1


def test_next_wake_is_the_earliest_deadline_or_the_tick(
    runtime: Runtime, clock: ManualClock
) -> None:
    from datetime import timedelta

    from watchkeeper.watch.sweeper import DEADLINE_SLACK

    idle = sweep(runtime)
    assert runtime.sweeper.next_wake(idle) == clock() + timedelta(seconds=30)
    start(runtime, "soon", budget_s=5, lease_s=3600)
    result = sweep(runtime)
    assert result.next_deadline == clock() + timedelta(seconds=5)
    assert runtime.sweeper.next_wake(result) == clock() + timedelta(seconds=5) + DEADLINE_SLACK
