"""Parked sessions and the wake breaker of each session."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.errors import NotFound
from watchkeeper.records.procs import Park, ParkState, ProcRun, SessionBreaker
from watchkeeper.store.base import Accessor
from watchkeeper.store.procs.rows import ACTIVE_STATUSES as _ACTIVE
from watchkeeper.store.procs.rows import R as _R
from watchkeeper.store.procs.rows import park_from_row, run_from_row
from watchkeeper.store.schema_procs import proc_parks, proc_runs, proc_sessions

_P = proc_parks.c
_S = proc_sessions.c


class Parks(Accessor):
    """Records parks, moves them once, and keeps each session's breaker."""

    def park(
        self, session: str, reason: str, until_run: str, wake_cmd: str | None, now: datetime
    ) -> Park:
        """Record that ``session`` handed back, waiting on ``until_run``."""
        values = {
            "session": session,
            "reason": reason,
            "until_run": until_run,
            "wake_cmd": wake_cmd,
            "state": ParkState.WAITING.value,
            "parked_at": to_epoch(now),
        }
        with self._write("parking a session") as conn:
            if conn.execute(select(_R.run_id).where(_R.run_id == until_run)).first() is None:
                raise NotFound(f"no process run {until_run!r} to wait on")
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
        """The session moved: reset its breaker and release its suppressed parks (count)."""
        at = to_epoch(now)
        with self._write("recording session progress") as conn:
            _update_session(
                conn, session, at, wakes_without_progress=0, progress_at=at, progress_note=note
            )
            return int(
                conn.execute(
                    update(proc_parks)
                    .where(_P.session == session, _P.state == ParkState.SUPPRESSED.value)
                    .values(state=ParkState.WAITING.value, note=None)
                ).rowcount
            )


def _update_session(conn: Connection, session: str, at: float, **values: Any) -> None:
    """Apply ``values`` to the breaker of ``session``, creating it first if it never woke."""
    found = conn.execute(select(_S.session).where(_S.session == session)).first()
    if found is None:
        conn.execute(
            insert(proc_sessions).values(session=session, wakes_without_progress=0, updated_at=at)
        )
    conn.execute(update(proc_sessions).where(_S.session == session).values(**values, updated_at=at))
