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
    """The progress budget that applies to ``run`` now: its current step's, else its own
    override, else its kind's."""
    if run.step_budget_s is not None:
        return run.step_budget_s
    return run.budget_s if run.budget_s is not None else spec.budget_s


def expected_of(run: RunView, spec: KindSpec) -> float | None:
    """How long ``run`` is expected to take, if anybody said."""
    return run.expected_s if run.expected_s is not None else spec.expected_s


def _last_word(run: RunView, last_move: datetime | None) -> datetime | None:
    """When the work last reported, moving or not (a report is never older than a move)."""
    if run.reported_at is None or last_move is None:
        return run.reported_at or last_move
    return max(run.reported_at, last_move)


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
    last_word = _last_word(run, last_move)
    # Silence for a whole budget is stalled, whatever the reports said before it.
    if last_word is not None and (now - last_word).total_seconds() > budget:
        since = last_word + timedelta(seconds=budget)
        return Verdict(Condition.STALLED, since, _stalled_reason(run, budget))
    return _looping(run, spec, budget, last_move, now) or _slow(run, spec, now)


def _stalled_reason(run: RunView, budget: float) -> str:
    reason = f"no progress for more than {budget:g} s"
    if run.step_budget_s is not None:
        reason += f", the budget of its step {_step_words(run)}"
    if run.repeats >= 2:
        reason += f"; its last {run.repeats} reports all said {_said(run)}"
    return reason


def _looping(
    run: RunView, spec: KindSpec, budget: float, last_move: datetime | None, now: datetime
) -> Verdict | None:
    """Reports keep coming and all say the same thing: ``loop_after`` of them in a row, or
    for longer than the budget. The repetition began at the last move."""
    if run.repeats < 2 or last_move is None:
        return None
    by_count = 0 < spec.loop_after <= run.repeats
    if not by_count and (now - last_move).total_seconds() <= budget:
        return None
    reason = f"repeating {_said(run)} {run.repeats} times since {last_move:%H:%M} UTC"
    if not by_count:
        reason += f", longer than its {budget:g} s budget"
    return Verdict(Condition.LOOPING, last_move, reason)


def _said(run: RunView) -> str:
    """What the repeated reports say: ``'calling web.search'`` or ``'indexing' at 3 of 40``."""
    words = repr(run.repeating or run.step) if (run.repeating or run.step) else "the same report"
    if run.done is not None:
        words += f" at {run.done}" + (f" of {run.total}" if run.total is not None else "")
    elif run.total is not None:
        words += f" of {run.total}"
    return words


def _step_words(run: RunView) -> str:
    return repr(run.step) if run.step else "(unnamed)"


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
    started = run.started_at
    if expected is not None and started is not None and (now - started).total_seconds() > expected:
        since = started + timedelta(seconds=expected)
        return Verdict(Condition.SLOW, since, f"running longer than the expected {expected:g} s")
    step_began = _step_began(run)
    if run.step_expected_s is None or step_began is None:
        return None
    if (now - step_began).total_seconds() <= run.step_expected_s:
        return None
    since = step_began + timedelta(seconds=run.step_expected_s)
    reason = (
        f"its step {_step_words(run)} is running longer than the expected {run.step_expected_s:g} s"
    )
    return Verdict(Condition.SLOW, since, reason)


def _step_began(run: RunView) -> datetime | None:
    """When the report that gave the current step its times came: the latest one."""
    return _last_word(run, run.progress_at or run.started_at)


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
    budget = timedelta(seconds=budget_of(run, spec))
    last_move = run.progress_at or run.started_at
    last_word = _last_word(run, last_move)
    if last_word is not None:
        candidates.append(last_word + budget)
    if last_move is not None and run.repeats >= 2:
        candidates.append(last_move + budget)  # the same reports for a whole budget: looping
    expected = expected_of(run, spec)
    if expected is not None and run.started_at is not None:
        candidates.append(run.started_at + timedelta(seconds=expected))
    if run.step_expected_s is not None and last_word is not None:
        candidates.append(last_word + timedelta(seconds=run.step_expected_s))
    future = [moment for moment in candidates if moment > now]
    return min(future) if future else None
