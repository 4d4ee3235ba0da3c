"""Every verdict, and the rules that keep verdicts honest."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from watchkeeper.contract import (
    Condition,
    Failure,
    KindSpec,
    Owner,
    OwnerKind,
    RunStatus,
    RunView,
)
from watchkeeper.judge import judge, next_deadline

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SPEC = KindSpec("crawl", budget_s=180, expected_s=None)
ALIVE = Owner(OwnerKind.LEASE, None, True, NOW + timedelta(seconds=60))


def run(**changes: object) -> RunView:
    base = RunView(
        kind="crawl",
        run_id="r1",
        title="crawl example.org",
        status=RunStatus.RUNNING,
        state_token="a1v1",
        owner=ALIVE,
        progress_at=NOW - timedelta(seconds=10),
        started_at=NOW - timedelta(seconds=100),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def test_progressing_work_has_no_verdict() -> None:
    assert judge(run(), SPEC, NOW) is None


def test_stalled_when_owner_alive_and_no_progress_within_budget() -> None:
    verdict = judge(run(progress_at=ago(181)), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.STALLED
    assert verdict.since == ago(1)
    assert verdict.paged


def test_exactly_at_budget_is_not_yet_stalled() -> None:
    assert judge(run(progress_at=ago(180)), SPEC, NOW) is None


def test_run_budget_overrides_kind_budget() -> None:
    assert judge(run(progress_at=ago(50), budget_s=30), SPEC, NOW) is not None
    assert judge(run(progress_at=ago(300), budget_s=600), SPEC, NOW) is None


def test_stuck_when_owner_is_gone() -> None:
    gone = Owner(OwnerKind.LEASE, None, False, ago(5))
    verdict = judge(run(owner=gone), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.STUCK
    assert verdict.since == ago(5)
    assert "lease" in verdict.reason


def test_owner_that_cannot_be_told_is_never_stuck_but_can_stall() -> None:
    unknown = Owner(OwnerKind.PID, "123@otherhost", None)
    assert judge(run(owner=unknown), SPEC, NOW) is None
    stalled = judge(run(owner=unknown, progress_at=ago(500)), SPEC, NOW)
    assert stalled is not None
    assert stalled.condition is Condition.STALLED


def test_waiting_work_is_never_stalled_nor_stuck() -> None:
    gone = Owner(OwnerKind.LEASE, None, False, ago(5000))
    assert (
        judge(run(status=RunStatus.WAITING, progress_at=ago(10**6), owner=gone), SPEC, NOW) is None
    )


def test_failed_carries_reason_and_fingerprint() -> None:
    failed = run(
        status=RunStatus.FAILED,
        failure=Failure("OOM killed", "oom"),
        finished_at=ago(3),
    )
    verdict = judge(failed, SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.FAILED
    assert verdict.fingerprint == "oom"
    assert verdict.reason == "OOM killed"
    assert verdict.since == ago(3)


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.CANCELLED])
def test_ended_work_is_fine_even_with_a_dead_owner(status: RunStatus) -> None:
    gone = Owner(OwnerKind.LEASE, None, False, ago(5))
    assert judge(run(status=status, owner=gone, progress_at=ago(9999)), SPEC, NOW) is None


def test_slow_is_shown_but_never_paged() -> None:
    verdict = judge(run(expected_s=60), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.SLOW
    assert not verdict.paged
    assert verdict.since == ago(40)


def test_stall_outranks_slow() -> None:
    verdict = judge(run(expected_s=60, progress_at=ago(400)), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.STALLED


def test_queued_work_without_owner_is_not_judged_stuck() -> None:
    queued = run(status=RunStatus.QUEUED, owner=Owner(), progress_at=ago(9999))
    assert judge(queued, SPEC, NOW) is None


def test_queued_and_leased_work_with_lapsed_lease_is_stuck() -> None:
    lapsed = Owner(OwnerKind.LEASE, "runner-1", False, ago(1))
    verdict = judge(run(status=RunStatus.QUEUED, owner=lapsed), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.STUCK


def test_next_deadline_is_the_earliest_of_lease_budget_and_expected() -> None:
    work = run(progress_at=ago(10), expected_s=500)
    assert next_deadline(work, SPEC, NOW) == ALIVE.expires_at
    long_lease = replace(ALIVE, expires_at=NOW + timedelta(hours=1))
    assert next_deadline(replace(work, owner=long_lease), SPEC, NOW) == ago(10) + timedelta(
        seconds=180
    )


def test_stalled_work_still_has_its_lease_deadline() -> None:
    stalled = run(progress_at=ago(500))
    assert next_deadline(stalled, SPEC, NOW) == ALIVE.expires_at


def test_no_deadline_for_waiting_or_ended_work() -> None:
    assert next_deadline(run(status=RunStatus.WAITING), SPEC, NOW) is None
    assert next_deadline(run(status=RunStatus.SUCCEEDED), SPEC, NOW) is None
