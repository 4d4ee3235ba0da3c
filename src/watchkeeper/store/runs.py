"""Push runs: work reported to watchkeeper over its API. Only moves, no judging.

Moves are the hot path (every progress report is one): the moves sent at the same
time are recorded in one transaction (:class:`~watchkeeper.store.group_commit.GroupCommit`),
each as one ``UPDATE ... RETURNING`` sent through the driver as it is (both drivers
prepare a statement they see again), and each caller is answered after that commit.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.contract import ACTIVE_STATUSES, RunStatus
from watchkeeper.errors import Conflict, NotFound, WatchkeeperError
from watchkeeper.store.base import Accessor, record_from_row
from watchkeeper.store.fencing import current_fence
from watchkeeper.store.group_commit import GroupCommit
from watchkeeper.store.schema import push_runs

_ACTIVE = [status.value for status in ACTIVE_STATUSES]
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
            times=("started_at", "progress_at", "finished_at", "updated_at"),
            status=RunStatus(m["status"]),
            last_seen_at=from_epoch(m["seen_at"]),
        )


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
    ) -> PushRun:
        """Apply ``values`` to an active run; a move bumps its version (its state token).

        Answered once the transaction holding the move committed.
        """
        move = _Move(kind, run_id, to_epoch(now), tuple(sorted(values.items())), counts_as_move)
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
        with self._write("updating a run") as conn, _driver_errors(conn) as cursor:
            dialect = conn.dialect
            for move in moves:
                keys = tuple(key for key, _ in move.values)
                sql, names, fixed = _move_sql(dialect, keys, move.counts_as_move)
                given = {f"v_{key}": value for key, value in move.values}
                given.update(
                    v_updated_at=move.at, v_seen_at=move.at, w_run_id=move.run_id, w_kind=move.kind
                )
                params = {**fixed, **given}
                cursor.execute(sql, tuple(params[name] for name in names) if names else params)
                row = cursor.fetchone()
                outcomes.append(_missing(conn, move.kind, move.run_id) if row is None else row)
        return outcomes

    def get(self, kind: str, run_id: str) -> PushRun:
        """One run, or :class:`NotFound`."""
        with self._read("reading a run") as conn:
            row = conn.execute(select(push_runs).where(push_runs.c.run_id == run_id)).first()
        if row is None or row.kind != kind:
            raise NotFound(f"no {kind} run {run_id!r}")
        return PushRun.from_row(row)

    def rows_for_judging(self, kind: str, finished_since: datetime) -> Sequence[Any]:
        """Active runs of ``kind`` and those that ended after ``finished_since``."""
        since = to_epoch(finished_since)
        statement = select(*JUDGE_COLUMNS).where(
            push_runs.c.kind == kind,
            push_runs.c.status.in_(_ACTIVE) | (push_runs.c.finished_at >= since),
        )
        with self._read(f"reading {kind} runs") as conn:
            return conn.execute(statement).all()

    def sweep_rows(
        self,
        kind: str,
        now: datetime,
        finished_since: datetime,
        budget_s: float,
        expected_s: float | None,
        watched: Collection[str],
    ) -> SweepRows:
        """Candidates for a verdict, the watched runs, and a summary of all the others.

        A candidate is a run the judge might flag: failed, or running with a
        lapsed lease, an exhausted budget or an overrun expectation. The rules
        here are a superset of the judge's, so it still decides every verdict.
        """
        at, since = to_epoch(now), to_epoch(finished_since)
        c = push_runs.c
        running = c.status == RunStatus.RUNNING.value
        budget_end = c.progress_at + func.coalesce(c.budget_s, budget_s)
        expected_end = c.started_at + func.coalesce(c.expected_s, expected_s)
        lease_end = c.seen_at + c.lease_s
        flagged = ((c.status == RunStatus.FAILED.value) & (c.finished_at >= since)) | (
            running & ((lease_end <= at) | (budget_end < at) | (expected_end < at))
        )
        if watched:
            flagged = flagged | c.run_id.in_(list(watched))
        considered = (c.kind == kind) & (c.status.in_(_ACTIVE) | (c.finished_at >= since))
        summary = select(
            func.count(),
            func.min(case((running & (lease_end > at), lease_end))),
            func.min(case((running & (budget_end > at), budget_end))),
            func.min(case((running & (expected_end > at), expected_end))),
        ).where(considered)
        with self._read(f"reading {kind} runs") as conn:
            rows = conn.execute(select(*JUDGE_COLUMNS).where(considered & flagged)).all()
            total, *ends = conn.execute(summary).one()
        future = [end for end in ends if end is not None]
        return SweepRows(rows, int(total), min(future) if future else None)

    def row_for_judging(self, kind: str, run_id: str) -> Any | None:
        """One run's judging columns, or ``None``."""
        statement = select(*JUDGE_COLUMNS).where(
            push_runs.c.kind == kind, push_runs.c.run_id == run_id
        )
        with self._read(f"reading {kind} run {run_id}") as conn:
            return conn.execute(statement).first()

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
        times=("started_at", "progress_at", "finished_at", "updated_at"),
        status=RunStatus(values["status"]),
        last_seen_at=from_epoch(values["seen_at"]),
    )


@contextmanager
def _driver_errors(conn: Connection) -> Iterator[Any]:
    """A driver cursor on ``conn``'s transaction; its errors raised as SQLAlchemy raises them.

    A lost connection is invalidated, so the pool does not hand it out again.
    """
    dbapi_connection = conn.connection.driver_connection
    assert dbapi_connection is not None
    dialect = conn.dialect
    dbapi = dialect.loaded_dbapi
    cursor = dbapi_connection.cursor()
    try:
        yield cursor
    except dbapi.Error as exc:
        lost = dialect.is_disconnect(exc, dbapi_connection, cursor)
        if lost:
            conn.invalidate(exc)
        raise DBAPIError.instance(
            None, None, exc, dbapi.Error, connection_invalidated=lost, dialect=dialect
        ) from exc
    finally:
        if not conn.invalidated:
            cursor.close()


@functools.lru_cache(maxsize=64)
def _move_sql(
    dialect: Dialect, keys: tuple[str, ...], counts_as_move: bool
) -> tuple[str, tuple[str, ...], dict[str, Any]]:
    """A move's statement in the driver's own terms, made once per shape of move: its text,
    the order of its parameters (none: named) and the values it carries itself."""
    compiled = _move_statement(keys, counts_as_move).compile(dialect=dialect)
    names = tuple(compiled.positiontup or ()) if compiled.positional else ()
    return str(compiled), names, dict(compiled.params)


def _move_statement(keys: tuple[str, ...], counts_as_move: bool) -> Any:
    """One UPDATE per shape of move."""
    values: dict[str, Any] = {key: bindparam(f"v_{key}") for key in keys}
    values.update(updated_at=bindparam("v_updated_at"), seen_at=bindparam("v_seen_at"))
    if counts_as_move:
        values["version"] = push_runs.c.version + 1
    return (
        update(push_runs)
        .where(
            and_(
                push_runs.c.run_id == bindparam("w_run_id"),
                push_runs.c.kind == bindparam("w_kind"),
                # Plain parameters, not an expanding IN: that one is re-rendered on every call.
                push_runs.c.status.in_([literal(status) for status in _ACTIVE]),
            )
        )
        .values(values)
        .returning(*push_runs.c)
    )


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
    )
    del values["run_id"], values["kind"]
    return values
