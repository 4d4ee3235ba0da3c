"""Push runs: work reported to watchkeeper over its API. Only moves, no judging.

Moves are the hot path (every progress report is one): the moves sent at the same
time are recorded in one transaction (:class:`~watchkeeper.store.group_commit.GroupCommit`),
each as one ``UPDATE ... RETURNING`` sent through the driver as it is (both drivers
prepare a statement they see again), and each caller is answered after that commit.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    case,
    func,
    insert,
    null,
    select,
    update,
)

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.contract import RunStatus
from watchkeeper.errors import Conflict, NotFound, WatchkeeperError
from watchkeeper.records.filling import UnreadableValue, enum_of
from watchkeeper.store.base import Accessor, record_from_row
from watchkeeper.store.fencing import current_fence
from watchkeeper.store.group_commit import GroupCommit
from watchkeeper.store.runs_moves import ACTIVE, driver_errors, move_sql
from watchkeeper.store.schema import push_runs
from watchkeeper.store.unreadable import each_readable, is_epoch, read_or_refuse

# Columns the sweep needs to judge a run: reading fewer keeps a sweep cheap.
JUDGE_COLUMNS = (
    push_runs.c.run_id,
    push_runs.c.title,
    push_runs.c.status,
    push_runs.c.attempt,
    push_runs.c.version,
    push_runs.c.origin,
    push_runs.c.effects,
    push_runs.c.budget_s,
    push_runs.c.expected_s,
    push_runs.c.lease_s,
    push_runs.c.started_at,
    push_runs.c.progress_at,
    push_runs.c.seen_at,
    push_runs.c.finished_at,
    push_runs.c.step,
    push_runs.c.failure_reason,
    push_runs.c.failure_fingerprint,
)
#: What a push run's reports said, read after :data:`JUDGE_COLUMNS` by the push kind.
REPORT_COLUMNS = (
    push_runs.c.reported_at,
    push_runs.c.repeats,
    push_runs.c.step_budget_s,
    push_runs.c.step_expected_s,
    push_runs.c.done,
    push_runs.c.total,
)


@dataclass(frozen=True, slots=True)
class NewRun:
    """What a reporter says when work starts."""

    kind: str
    run_id: str
    title: str
    origin: dict[str, str] | None
    effects: str
    budget_s: float | None
    expected_s: float | None
    lease_s: float


@dataclass(frozen=True, slots=True)
class PushRun:
    """One stored push run, as the API shows it."""

    kind: str
    run_id: str
    title: str
    status: RunStatus
    attempt: int
    version: int
    origin: dict[str, str] | None
    effects: str
    budget_s: float | None
    expected_s: float | None
    lease_s: float
    started_at: datetime
    progress_at: datetime
    last_seen_at: datetime
    finished_at: datetime | None
    updated_at: datetime
    step: str | None
    failure_reason: str | None
    failure_fingerprint: str | None
    detail: str | None
    reported_at: datetime | None = None
    repeats: int = 0
    step_budget_s: float | None = None
    step_expected_s: float | None = None
    done: int | None = None
    total: int | None = None

    @property
    def state_token(self) -> str:
        """Changes whenever the work moves; opaque to callers."""
        return state_token(self.attempt, self.version)

    @classmethod
    def from_row(cls, row: Row[Any]) -> PushRun:
        """Build from a full ``push_runs`` row."""
        m = row._mapping
        return record_from_row(
            cls,
            row,
            times=_TIMES,
            check=True,
            status=enum_of(RunStatus, m, "status"),
            last_seen_at=_last_seen(m),
        )


_TIMES = ("started_at", "progress_at", "finished_at", "updated_at", "reported_at")


@dataclass(frozen=True, slots=True)
class SweepRows:
    """A sweep's read of one push kind: candidate rows, how many runs in all, next deadline."""

    rows: Sequence[Any]
    total: int
    deadline: float | None


def state_token(attempt: int, version: int) -> str:
    """The state token of a push run at ``attempt`` and ``version``."""
    return f"a{attempt}v{version}"


@dataclass(frozen=True, slots=True)
class _Move:
    """One move waiting for its group's transaction."""

    kind: str
    run_id: str
    at: float
    values: tuple[tuple[str, Any], ...]
    counts_as_move: bool
    #: A progress report's time: its move counts only if it says something new.
    reported: float | None = None


#: What a move comes to: the run's new row, or why no active run was moved.
_Moved = tuple[Any, ...] | WatchkeeperError


class PushRunStore(Accessor):
    """Reads and moves push runs. Every move is one statement; moves sent together share
    one transaction."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._moves: GroupCommit[_Move, _Moved] = GroupCommit(self._record_moves)

    def start(self, new: NewRun, now: datetime) -> tuple[PushRun, bool]:
        """Record that work started; returns the run and whether anything changed.

        Starting a run that is already active is idempotent; starting an ended
        one begins its next attempt. A run id belongs to one kind for good.
        """
        at = to_epoch(now)
        with self._write("starting a run") as conn:
            row = conn.execute(select(push_runs).where(push_runs.c.run_id == new.run_id)).first()
            if row is None:
                values = _fresh_values(new, at)
                conn.execute(insert(push_runs).values(**values))
                changed = True
            else:
                _same_kind(row, new.kind, new.run_id)
                changed = RunStatus(row.status).ended
                if changed:
                    conn.execute(
                        update(push_runs)
                        .where(push_runs.c.run_id == new.run_id)
                        .values(**_restart_values(new, at, row.attempt, row.version))
                    )
            fresh = conn.execute(select(push_runs).where(push_runs.c.run_id == new.run_id)).one()
        return PushRun.from_row(fresh), changed

    def move(
        self,
        kind: str,
        run_id: str,
        now: datetime,
        values: dict[str, Any],
        *,
        counts_as_move: bool = True,
        reported: datetime | None = None,
    ) -> PushRun:
        """Apply ``values`` to an active run; a move bumps its version (its state token).

        ``reported`` makes the move a progress report made at that time: it moves the run
        (``progress_at``, its version) only when it says something new (a ``step``,
        ``done`` or ``total`` in ``values`` other than the run holds) or names none of
        them; else it counts one more repeat. Either way one statement records it, with
        no read before it (:func:`~watchkeeper.store.runs_moves.report_values`).

        Answered once the transaction holding the move committed.
        """
        move = _Move(
            kind,
            run_id,
            to_epoch(now),
            tuple(sorted(values.items())),
            counts_as_move,
            None if reported is None else to_epoch(reported),
        )
        if current_fence() is None:
            outcome = self._moves.run([move])[0]
        else:
            # A fenced pass's write carries its own lease check: never grouped with others'.
            outcome = self._record_moves([move])[0]
        if isinstance(outcome, WatchkeeperError):
            raise outcome
        return _run_from_values(outcome)

    def _record_moves(self, moves: list[_Move]) -> list[_Moved]:
        """Apply ``moves`` in one transaction: each one's new row, or why there was none."""
        outcomes: list[_Moved] = []
        with self._write("updating a run") as conn, driver_errors(conn) as cursor:
            dialect = conn.dialect
            for move in moves:
                keys = tuple(key for key, _ in move.values)
                report = move.reported is not None
                sql, names, fixed = move_sql(dialect, keys, move.counts_as_move, report)
                given = {f"v_{key}": value for key, value in move.values}
                given.update(
                    v_updated_at=move.at, v_seen_at=move.at, w_run_id=move.run_id, w_kind=move.kind
                )
                if report:
                    given["v_reported_at"] = move.reported
                params = {**fixed, **given}
                cursor.execute(sql, tuple(params[name] for name in names) if names else params)
                row = cursor.fetchone()
                outcomes.append(_missing(conn, move.kind, move.run_id) if row is None else row)
        return outcomes

    def set_origin(self, kind: str, run_id: str, origin: dict[str, str] | None) -> bool:
        """Say where the run's notices go from now on (``None``: the ops channels), whatever
        its status; whether there is such a run. Not a move: its state token stays."""
        with self._write("routing a run") as conn:
            changed = conn.execute(
                update(push_runs)
                .where(push_runs.c.run_id == run_id, push_runs.c.kind == kind)
                .values(origin=null() if origin is None else origin)
            ).rowcount
        return bool(changed)

    def get(self, kind: str, run_id: str) -> PushRun:
        """One run, or :class:`NotFound`."""
        with self._read("reading a run") as conn:
            row = conn.execute(select(push_runs).where(push_runs.c.run_id == run_id)).first()
        if row is None or row.kind != kind:
            raise NotFound(f"no {kind} run {run_id!r}")
        return read_or_refuse("push_runs", row, PushRun.from_row, "run_id")

    def rows_for_judging(
        self, kind: str, finished_since: datetime, *, reports: bool = False
    ) -> Sequence[Any]:
        """Active runs of ``kind`` and those that ended after ``finished_since``: their
        :data:`JUDGE_COLUMNS`, then with ``reports`` their :data:`REPORT_COLUMNS`."""
        since = to_epoch(finished_since)
        columns = (*JUDGE_COLUMNS, *REPORT_COLUMNS) if reports else JUDGE_COLUMNS
        statement = select(*columns).where(
            push_runs.c.kind == kind,
            push_runs.c.status.in_(ACTIVE) | (push_runs.c.finished_at >= since),
        )
        with self._read(f"reading {kind} runs") as conn:
            rows = conn.execute(statement)
            return list(each_readable("push_runs", rows, _judgeable, key="run_id"))

    def sweep_rows(
        self,
        kind: str,
        now: datetime,
        finished_since: datetime,
        budget_s: float,
        expected_s: float | None,
        watched: Collection[str],
        loop_after: int = 0,
    ) -> SweepRows:
        """Candidates for a verdict, the watched runs, and a summary of all the others.

        A candidate is a run the judge might flag: failed, or running with a
        lapsed lease, an exhausted budget (its step's, its own or ``budget_s``),
        ``loop_after`` identical reports in a row (0: never by count) or an overrun
        expectation. The rules here are a superset of the judge's, so it still
        decides every verdict.
        """
        at, since = to_epoch(now), to_epoch(finished_since)
        c = push_runs.c
        running = c.status == RunStatus.RUNNING.value
        # A move is never later than the last report: a budget counted from the move ends
        # first, for stalled and for identical reports that outlast it (looping) alike.
        budget_end = c.progress_at + func.coalesce(c.step_budget_s, c.budget_s, budget_s)
        expected_end = c.started_at + func.coalesce(c.expected_s, expected_s)
        step_expected_end = func.coalesce(c.reported_at, c.progress_at) + c.step_expected_s
        lease_end = c.seen_at + c.lease_s
        overdue = (lease_end <= at) | (budget_end < at) | (expected_end < at)
        overdue = overdue | (step_expected_end < at)
        if loop_after > 0:
            overdue = overdue | (c.repeats >= max(loop_after, 2))
        flagged = ((c.status == RunStatus.FAILED.value) & (c.finished_at >= since)) | (
            running & overdue
        )
        if watched:
            flagged = flagged | c.run_id.in_(list(watched))
        considered = (c.kind == kind) & (c.status.in_(ACTIVE) | (c.finished_at >= since))
        summary = select(
            func.count(),
            func.min(case((running & (lease_end > at), lease_end))),
            func.min(case((running & (budget_end > at), budget_end))),
            func.min(case((running & (expected_end > at), expected_end))),
            func.min(case((running & (step_expected_end > at), step_expected_end))),
        ).where(considered)
        with self._read(f"reading {kind} runs") as conn:
            found = conn.execute(
                select(*JUDGE_COLUMNS, *REPORT_COLUMNS).where(considered & flagged)
            )
            rows = list(each_readable("push_runs", found, _judgeable, key="run_id"))
            total, *ends = conn.execute(summary).one()
        future = [end for end in ends if end is not None and is_epoch(end)]
        return SweepRows(rows, int(total), min(future) if future else None)

    def row_for_judging(self, kind: str, run_id: str) -> Any | None:
        """One run's judging and report columns, or ``None``."""
        statement = select(*JUDGE_COLUMNS, *REPORT_COLUMNS).where(
            push_runs.c.kind == kind, push_runs.c.run_id == run_id
        )
        with self._read(f"reading {kind} run {run_id}") as conn:
            row = conn.execute(statement).first()
        return None if row is None else read_or_refuse("push_runs", row, _judgeable, "run_id")

    def kinds_in_use(self) -> Iterable[str]:
        """Every kind name that has push runs."""
        with self._read("listing kinds") as conn:
            return [row.kind for row in conn.execute(select(push_runs.c.kind).distinct())]


#: The columns a move returns, in the order its row holds them.
_RETURNED = tuple(column.name for column in push_runs.c)


def _run_from_values(row: tuple[Any, ...]) -> PushRun:
    """A run from a driver's row of :data:`_RETURNED` (JSON as the driver gave it)."""
    values = dict(zip(_RETURNED, row, strict=True))
    origin = values["origin"]
    if isinstance(origin, str | bytes):
        values["origin"] = json.loads(origin)
    return record_from_row(
        PushRun,
        values,
        times=_TIMES,
        check=True,
        status=enum_of(RunStatus, values, "status"),
        last_seen_at=_last_seen(values),
    )


def _last_seen(m: Mapping[Any, Any]) -> datetime:
    seen_at: float = m["seen_at"]
    try:
        return from_epoch(seen_at)
    except ValueError as exc:
        raise UnreadableValue("seen_at", seen_at, str(exc)) from None


_STATUSES = frozenset(status.value for status in RunStatus)


def _judgeable(row: Row[Any]) -> Row[Any]:
    """``row`` (of :data:`JUDGE_COLUMNS`) as it is, once what the kind reads of it is known
    to be readable; :class:`UnreadableValue` otherwise. Checked by value, not by making
    times: every active run is read on every page."""
    m = row._mapping
    if m["status"] not in _STATUSES:
        raise UnreadableValue("status", m["status"], "not a status a run has")
    for name in ("started_at", "progress_at", "seen_at", "finished_at"):
        if not (m[name] is None and name == "finished_at") and not is_epoch(m[name]):
            raise UnreadableValue(name, m[name], "no time a calendar holds")
    if "repeats" in m:  # read with REPORT_COLUMNS
        if m["reported_at"] is not None and not is_epoch(m["reported_at"]):
            raise UnreadableValue("reported_at", m["reported_at"], "no time a calendar holds")
        if not isinstance(m["repeats"], int):
            raise UnreadableValue("repeats", m["repeats"], "not a whole number")
    if not is_epoch(m["lease_s"]) or not is_epoch(m["seen_at"] + m["lease_s"]):
        raise UnreadableValue("lease_s", m["lease_s"], "no lease ends then")
    if not isinstance(m["attempt"], int) or not isinstance(m["version"], int):
        raise UnreadableValue("attempt", (m["attempt"], m["version"]), "not whole numbers")
    if m["origin"] is not None and not isinstance(m["origin"], dict):
        raise UnreadableValue("origin", m["origin"], "not a JSON object")
    return row


def _missing(conn: Connection, kind: str, run_id: str) -> WatchkeeperError:
    """Why a move found no active run, read in the move's own transaction."""
    row = conn.execute(
        select(push_runs.c.kind, push_runs.c.status).where(push_runs.c.run_id == run_id)
    ).first()
    if row is None:
        return NotFound(f"no {kind} run {run_id!r}: start it first (`watchkeeper report start`)")
    if row.kind != kind:
        return _other_kind(row.kind, kind, run_id)
    return Conflict(
        f"{kind} run {run_id!r} has already ended ({row.status}); "
        "start it again to report a new attempt"
    )


def _other_kind(found: str, kind: str, run_id: str) -> Conflict:
    return Conflict(
        f"run id {run_id!r} already belongs to kind {found!r}, not {kind!r}; choose another run id"
    )


def _same_kind(row: Any, kind: str, run_id: str) -> None:
    if row.kind != kind:
        raise _other_kind(row.kind, kind, run_id)


def _fresh_values(new: NewRun, at: float | None) -> dict[str, Any]:
    return {
        "run_id": new.run_id,
        "kind": new.kind,
        "title": new.title,
        "status": RunStatus.RUNNING.value,
        "attempt": 1,
        "version": 1,
        "origin": new.origin,
        "effects": new.effects,
        "budget_s": new.budget_s,
        "expected_s": new.expected_s,
        "lease_s": new.lease_s,
        "started_at": at,
        "progress_at": at,
        "seen_at": at,
        "updated_at": at,
    }


def _restart_values(new: NewRun, at: float | None, attempt: int, version: int) -> dict[str, Any]:
    values = _fresh_values(new, at)
    values.update(
        attempt=attempt + 1,
        version=version + 1,
        finished_at=None,
        step=None,
        failure_reason=None,
        failure_fingerprint=None,
        detail=None,
        reported_at=None,
        repeats=0,
        step_budget_s=None,
        step_expected_s=None,
        done=None,
        total=None,
    )
    del values["run_id"], values["kind"]
    return values
