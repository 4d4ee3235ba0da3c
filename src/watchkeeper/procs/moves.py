"""What starting and settling a run asks of the store: the moves of one run's record.

:class:`watchkeeper.store.procs.ProcStore` makes them through SQLAlchemy on either
database. ``watchkeeper run``'s fast path makes the same moves on the embedded SQLite
file through the standard library (:mod:`watchkeeper.store.lite.procs`), so launching,
settling and reaping are written once, against this protocol.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from watchkeeper.records.procs import NewProc, ProcRun, ProcStatus, Started


class RunMoves(Protocol):
    """Register, start, watch and end process runs; each move one conditional statement."""

    def register(
        self,
        new: NewProc,
        now: datetime,
        *,
        engine_key: str | None = None,
        witness_key: str | None = None,
    ) -> ProcRun:
        """Commit a run in ``starting`` before its command exists."""

    def mark_started(self, run_id: str, started: Started, now: datetime) -> None:
        """Record the owner the shim reported; ``starting`` becomes ``running``."""

    def finish(
        self,
        run_id: str,
        status: ProcStatus,
        now: datetime,
        *,
        exit_code: int | None = None,
        signal: int | None = None,
        reason: str | None = None,
        finished_at: datetime | None = None,
    ) -> bool:
        """End an active run; ``False`` if it had already ended."""

    def witness_key(self, run_id: str) -> str | None:
        """The key the run's witness must be signed with."""

    def note_forged(self, run_id: str, note: str, now: datetime) -> bool:
        """Say on an active run without a reason that its witness was forged."""

    def set_started_at(self, run_id: str, started_at: datetime) -> None:
        """Fill ``started_at`` of a run that ended before its start was recorded."""

    def observe_log(
        self, run_id: str, size: int, mtime: float, now: datetime, *, progressed: bool
    ) -> bool:
        """Record the log's size and time; ``progressed`` also moves the run."""

    def request_abort(self, run_id: str, now: datetime, reason: str, *, cancel: bool) -> None:
        """Note why the run is being ended before signalling it."""

    def get(self, run_id: str) -> ProcRun:
        """One run, or ``NotFound``."""

    def active_on(self, engine_key: str) -> list[ProcRun]:
        """Active runs the engine of ``engine_key`` settles."""
