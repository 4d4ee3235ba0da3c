"""The only place a verdict is decided. Pure: no I/O, the time is passed in."""

from __future__ import annotations

from datetime import datetime, timedelta

from watchkeeper.contract import (
    Condition,
    KindSpec,
    OwnerKind,
    RunStatus,
    RunView,
    Verdict,
)

# Statuses in which the owner is expected to be doing something.
_OWNED = frozenset({RunStatus.RUNNING})


def budget_of(run: RunView, spec: KindSpec) -> float:
    """The progress budget that applies to ``run``: its own override or its kind's."""
    return run.budget_s if run.budget_s is not None else spec.budget_s


def expected_of(run: RunView, spec: KindSpec) -> float | None:
    """How long ``run`` is expected to take, if anybody said."""
    return run.expected_s if run.expected_s is not None else spec.expected_s


def _is_owned(run: RunView) -> bool:
    # Queued work counts as owned only once something has leased it.
    if run.status in _OWNED:
        return True
    return run.status is RunStatus.QUEUED and run.owner.kind is not OwnerKind.NONE


def judge(run: RunView, spec: KindSpec, now: datetime) -> Verdict | None:
    """Judge one run by its progress.

    Returns ``None`` for healthy, waiting and successfully ended work.
    """
    if run.status is RunStatus.FAILED:
        return _failed(run, now)
    if run.status.ended or run.status is RunStatus.WAITING or not _is_owned(run):
        return None
    if run.owner.alive is False:
        since = run.owner.expires_at or run.progress_at or run.started_at or now
        return Verdict(Condition.STUCK, since, _stuck_reason(run))
    budget = budget_of(run, spec)
    last_move = run.progress_at or run.started_at
    if last_move is not None and (now - last_move).total_seconds() > budget:
        since = last_move + timedelta(seconds=budget)
        return Verdict(Condition.STALLED, since, f"no progress for more than {budget:g} s")
    return _slow(run, spec, now)


def _failed(run: RunView, now: datetime) -> Verdict:
    failure = run.failure
    reason = failure.reason if failure else "failed without a reason"
    fingerprint = failure.fingerprint if failure else ""
    return Verdict(Condition.FAILED, run.finished_at or now, reason, fingerprint)


def _stuck_reason(run: RunView) -> str:
    if run.owner.kind is OwnerKind.LEASE:
        return "its owner stopped reporting: the lease lapsed"
    if run.owner.kind is OwnerKind.PID:
        return "its process is gone"
    if run.owner.kind is OwnerKind.RUNNER:
        return "the runner that leased it is gone"
    return "nothing runs it"


def _slow(run: RunView, spec: KindSpec, now: datetime) -> Verdict | None:
    expected = expected_of(run, spec)
    if expected is None or run.started_at is None:
        return None
    if (now - run.started_at).total_seconds() <= expected:
        return None
    since = run.started_at + timedelta(seconds=expected)
    return Verdict(Condition.SLOW, since, f"running longer than the expected {expected:g} s")


def next_deadline(run: RunView, spec: KindSpec, now: datetime) -> datetime | None:
    """The earliest moment after ``now`` the verdict on ``run`` could change without new reports.

    The sweep loop sleeps until the earliest deadline over all runs, so a
    budget that runs out is judged promptly instead of at the next tick. A
    stalled run still has a deadline: its lease running out makes it stuck.
    """
    if run.status.ended or run.status is RunStatus.WAITING or not _is_owned(run):
        return None
    candidates: list[datetime] = []
    if run.owner.alive is True and run.owner.expires_at is not None:
        candidates.append(run.owner.expires_at)
    last_move = run.progress_at or run.started_at
    if last_move is not None:
        candidates.append(last_move + timedelta(seconds=budget_of(run, spec)))
    expected = expected_of(run, spec)
    if expected is not None and run.started_at is not None:
        candidates.append(run.started_at + timedelta(seconds=expected))
    future = [moment for moment in candidates if moment > now]
    return min(future) if future else None
