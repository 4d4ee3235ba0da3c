"""Parked sessions and the wake breaker of each session.

A park keeps the engine's last look at the run it watches (``seen_status``,
``seen_log_size``); the breaker resets only when the engine sees that run move
from it, never on a session's own note.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, or_, select, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.errors import NotFound
from watchkeeper.records.procs import Park, ParkState, ProcRun, SessionBreaker
from watchkeeper.store.base import Accessor
from watchkeeper.store.procs.rows import ACTIVE_STATUSES as _ACTIVE
from watchkeeper.store.procs.rows import R as _R
from watchkeeper.store.procs.rows import park_from_row, run_from_row
from watchkeeper.store.schema.procs import proc_parks, proc_runs, proc_sessions

_P = proc_parks.c
_S = proc_sessions.c


class Parks(Accessor):
    """Records parks, moves them once, and keeps each session's breaker."""

    def park(
        self, session: str, reason: str, until_run: str, wake_cmd: str | None, now: datetime
    ) -> Park:
        """Record that ``session`` handed back, waiting on ``until_run``, and how that run looks."""
        values: dict[str, Any] = {
            "session": session,
            "reason": reason,
            "until_run": until_run,
            "wake_cmd": wake_cmd,
            "state": ParkState.WAITING.value,
            "parked_at": to_epoch(now),
        }
        with self._write("parking a session") as conn:
            run = conn.execute(select(_R.status, _R.log_size).where(_R.run_id == until_run)).first()
            if run is None:
                raise NotFound(f"no process run {until_run!r} to wait on")
            values.update(seen_status=run.status, seen_log_size=run.log_size)
            inserted = conn.execute(insert(proc_parks).values(**values)).inserted_primary_key
            assert inserted is not None  # an autoincrement key is always returned
            new_id = inserted[0]
            row = conn.execute(select(proc_parks).where(_P.id == new_id)).one()
        return park_from_row(row)

    def parks(self, *, state: ParkState | None = None, limit: int = 500) -> list[Park]:
        """Parks, newest first."""
        statement = select(proc_parks).order_by(_P.id.desc()).limit(limit)
        if state is not None:
            statement = statement.where(_P.state == state.value)
        with self._read("listing parked sessions") as conn:
            return [park_from_row(row) for row in conn.execute(statement)]

    def wakeable_parks(self) -> list[tuple[Park, ProcRun]]:
        """Waiting parks whose run has ended, with the run."""
        statement = (
            select(proc_parks, proc_runs)
            .join(proc_runs, _R.run_id == _P.until_run)
            .where(_P.state == ParkState.WAITING.value, _R.status.not_in(_ACTIVE))
            .order_by(_P.id)
        )
        with self._read("reading wakeable parks") as conn:
            rows = conn.execute(statement).all()
        return [(park_from_row(row), run_from_row(row)) for row in rows]

    def move_park(
        self, park_id: int, to: ParkState, now: datetime, note: str | None = None
    ) -> bool:
        """``waiting`` -> ``to``; ``False`` if another engine moved it first."""
        values: dict[str, Any] = {"state": to.value, "note": note}
        if to is ParkState.WOKEN:
            values["woken_at"] = to_epoch(now)
        statement = update(proc_parks).where(_P.id == park_id, _P.state == ParkState.WAITING.value)
        with self._write("moving a parked session") as conn:
            return conn.execute(statement.values(**values)).rowcount == 1

    def session(self, session: str) -> SessionBreaker:
        """The wake breaker of ``session`` (a fresh one if it never woke)."""
        with self._read("reading a session") as conn:
            row = conn.execute(select(proc_sessions).where(_S.session == session)).first()
        if row is None:
            return SessionBreaker(session, 0, None, None, None)
        return SessionBreaker(
            session,
            row.wakes_without_progress,
            from_epoch(row.progress_at),
            row.progress_note,
            from_epoch(row.last_wake_at),
        )

    def sessions(self, names: Sequence[str]) -> dict[str, SessionBreaker]:
        """Breakers of several sessions at once."""
        return {name: self.session(name) for name in dict.fromkeys(names)}

    def record_wake(self, session: str, now: datetime) -> None:
        """One more wake without progress."""
        at = to_epoch(now)
        with self._write("recording a wake") as conn:
            _update_session(
                conn,
                session,
                at,
                wakes_without_progress=_S.wakes_without_progress + 1,
                last_wake_at=at,
            )

    def session_progress(self, session: str, note: str | None, now: datetime) -> int:
        """Record the session's own note of what it did; it releases nothing, so always 0.

        A session that loops says it moved every round: only what the engine
        sees (:meth:`observe_watched`) resets the breaker.
        """
        with self._write("recording a session's progress note") as conn:
            _update_session(conn, session, to_epoch(now), progress_note=note)
        return 0

    def observe_watched(self, now: datetime) -> list[str]:
        """Look at the runs that waiting and held parks watch; reset each session whose run moved.

        A move is a longer log than last seen, or a run that was active and has
        ended. The new look is stored with a compare-and-set, so of two engines
        only one counts it. A park without a look yet only records one.
        Returns the sessions whose breaker was reset.
        """
        at = to_epoch(now)
        statement = (
            select(_P.id, _P.session, _P.seen_status, _P.seen_log_size, _R.status, _R.log_size)
            .join(proc_runs, _R.run_id == _P.until_run)
            .where(
                _P.state.in_([ParkState.WAITING.value, ParkState.SUPPRESSED.value]),
                or_(
                    _P.seen_status.is_(None),
                    _P.seen_log_size.is_(None),
                    _P.seen_status != _R.status,
                    _P.seen_log_size != _R.log_size,
                ),
            )
            .order_by(_P.id)
        )
        # Most sweeps find nothing: only a look that changed takes a write transaction.
        with self._read("reading watched runs") as conn:
            rows = conn.execute(statement).all()
        if not rows:
            return []
        moved: dict[str, None] = {}
        with self._write("observing watched runs") as conn:
            for row in rows:
                looked = conn.execute(
                    update(proc_parks)
                    .where(
                        _P.id == row.id,
                        _P.seen_status.is_not_distinct_from(row.seen_status),
                        _P.seen_log_size.is_not_distinct_from(row.seen_log_size),
                    )
                    .values(seen_status=row.status, seen_log_size=row.log_size)
                ).rowcount
                if looked == 1 and _run_moved(
                    row.seen_status, row.seen_log_size, row.status, row.log_size
                ):
                    moved[row.session] = None
            for session in moved:
                _update_session(conn, session, at, wakes_without_progress=0, progress_at=at)
                conn.execute(
                    update(proc_parks)
                    .where(_P.session == session, _P.state == ParkState.SUPPRESSED.value)
                    .values(state=ParkState.WAITING.value, note=None)
                )
        return list(moved)


def _run_moved(
    seen_status: str | None, seen_log_size: int | None, status: str, log_size: int
) -> bool:
    """The run grew its log or ended since the last look (a first look is no move)."""
    if seen_status is None or seen_log_size is None:
        return False
    ended = seen_status in _ACTIVE and status not in _ACTIVE
    return ended or log_size > seen_log_size


def _update_session(conn: Connection, session: str, at: float, **values: Any) -> None:
    """Apply ``values`` to the breaker of ``session``, creating it first if it never woke."""
    found = conn.execute(select(_S.session).where(_S.session == session)).first()
    if found is None:
        conn.execute(
            insert(proc_sessions).values(session=session, wakes_without_progress=0, updated_at=at)
        )
    conn.execute(update(proc_sessions).where(_S.session == session).values(**values, updated_at=at))
