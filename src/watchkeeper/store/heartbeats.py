"""The sweep loop's own heartbeat: one row per replica, rewritten every sweep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from watchkeeper.clock import to_epoch
from watchkeeper.store.base import Accessor, record_from_row, upsert
from watchkeeper.store.schema import watch_heartbeats


@dataclass(frozen=True, slots=True)
class SweepBeat:
    """What one replica's latest sweep left behind."""

    replica: str
    last_sweep_at: datetime
    last_ok_at: datetime | None
    duration_s: float
    runs: int
    error: str | None


_BEAT_TIMES = ("last_sweep_at", "last_ok_at")


class HeartbeatStore(Accessor):
    """Records and reads sweep heartbeats."""

    def beat(self, beat: SweepBeat) -> None:
        """Record a sweep (an upsert written portably: update, then insert if absent)."""
        values = {
            "last_sweep_at": to_epoch(beat.last_sweep_at),
            "last_ok_at": to_epoch(beat.last_ok_at),
            "duration_s": beat.duration_s,
            "runs": beat.runs,
            "error": beat.error[:2000] if beat.error else None,
        }
        with self._write("recording the sweep heartbeat") as conn:
            upsert(conn, watch_heartbeats, {"replica": beat.replica}, values)

    def all(self) -> list[SweepBeat]:
        """Every replica's latest sweep."""
        with self._read("reading sweep heartbeats") as conn:
            rows = conn.execute(select(watch_heartbeats)).all()
        return [record_from_row(SweepBeat, row, times=_BEAT_TIMES) for row in rows]
