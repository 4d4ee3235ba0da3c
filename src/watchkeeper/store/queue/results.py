"""The journal of posting a job's end where it came from: claimed, settled, never twice.

``waiting`` -> ``firing`` is one conditional update committed before anything is
posted, so of several servers on one database exactly one claims each end.
``fired`` or ``failed`` after. A claim left ``firing`` longer than a post can take
belongs to a server that stopped mid-post: it becomes ``maybe_fired``, never posted
again. A job that runs again (retried, resumed) is ``waiting`` once more.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select, update

from watchkeeper.clock import to_epoch
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.rows import ACTIVE, T
from watchkeeper.store.schema.queue import queue_job_results

_X = queue_job_results.c
WAITING = "waiting"
FIRING = "firing"
FIRED = "fired"
FAILED = "failed"
MAYBE_FIRED = "maybe_fired"
#: What a job that runs again may be re-armed from: never a claim in flight.
_SETTLED = (FIRED, FAILED, MAYBE_FIRED)


class Results(Part):
    """Moves the result journal of jobs with an origin, one conditional update per move."""

    def due_results(self, limit: int = 100) -> list[str]:
        """Up to ``limit`` jobs that have ended (no task queued, running or stuck) and whose
        end nobody has claimed yet."""
        active = select(T.id).where(T.job_id == _X.job_id, T.status.in_(ACTIVE)).exists()
        statement = (
            select(_X.job_id).where(_X.state == WAITING, ~active).order_by(_X.job_id).limit(limit)
        )
        with self._read("reading jobs whose results wait") as conn:
            return [str(job_id) for job_id in conn.execute(statement).scalars()]

    def claim_result(self, job_id: str, end_key: str, now: datetime) -> bool:
        """``waiting`` -> ``firing`` for the end ``end_key``; ``False`` if another took it."""
        moved = self._move_result(
            "claiming a job's result",
            _X.job_id == job_id,
            (WAITING,),
            state=FIRING,
            end_key=end_key,
            claimed_at=to_epoch(now),
            error=None,
        )
        return moved == 1

    def settle_result(self, job_id: str, fired: bool, error: str | None, now: datetime) -> None:
        """``firing`` -> ``fired`` or ``failed`` (with what went wrong)."""
        self._move_result(
            "settling a job's result",
            _X.job_id == job_id,
            (FIRING,),
            state=FIRED if fired else FAILED,
            error=None if error is None else error[:2000],
            settled_at=to_epoch(now),
        )

    def reconcile_results(self, claimed_before: datetime) -> int:
        """Claims left ``firing`` since before ``claimed_before`` may have posted: never again."""
        return self._move_result(
            "reconciling job results",
            _X.claimed_at < to_epoch(claimed_before),
            (FIRING,),
            state=MAYBE_FIRED,
            error="watchkeeper stopped while posting: it may or may not have been posted",
        )

    def rearm_result(self, job_id: str) -> bool:
        """The job runs again: its next end is to be posted too. ``False`` if nothing to do."""
        return (
            self._move_result(
                "re-arming a job's result", _X.job_id == job_id, _SETTLED, state=WAITING
            )
            == 1
        )

    def result_of(self, job_id: str) -> tuple[str, str | None] | None:
        """The journal's state of ``job_id`` and its error, ``None`` for a job without one."""
        statement = select(_X.state, _X.error).where(_X.job_id == job_id)
        with self._read("reading a job's result") as conn:
            row = conn.execute(statement).first()
        return None if row is None else (str(row.state), row.error)

    def _move_result(
        self, action: str, which: ColumnElement[bool], from_states: tuple[str, ...], **values: Any
    ) -> int:
        statement = update(queue_job_results).where(which, _X.state.in_(from_states))
        with self._write(action) as conn:
            return int(conn.execute(statement.values(**values)).rowcount)
