"""The sweep loop's own heartbeat: one row per replica, rewritten every sweep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select, update
from sqlalchemy import insert as sa_insert

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.store.engine import translate_errors, write_transaction
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


class HeartbeatStore:
    """Records and reads sweep heartbeats."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def beat(self, beat: SweepBeat) -> None:
        """Record a sweep (an upsert written portably: update, then insert if absent)."""
        values = {
            "last_sweep_at": to_epoch(beat.last_sweep_at),
            "last_ok_at": to_epoch(beat.last_ok_at),
            "duration_s": beat.duration_s,
            "runs": beat.runs,
            "error": beat.error[:2000] if beat.error else None,
        }
        with (
            translate_errors("recording the sweep heartbeat"),
            write_transaction(self._engine) as conn,
        ):
            updated = conn.execute(
                update(watch_heartbeats)
                .where(watch_heartbeats.c.replica == beat.replica)
                .values(**values)
            ).rowcount
            if not updated:
                conn.execute(sa_insert(watch_heartbeats).values(replica=beat.replica, **values))

    def all(self) -> list[SweepBeat]:
        """Every replica's latest sweep."""
        with translate_errors("reading sweep heartbeats"), self._engine.connect() as conn:
            rows = conn.execute(select(watch_heartbeats)).all()
        result = []
        for row in rows:
            last = from_epoch(row.last_sweep_at)
            assert last is not None
            result.append(
                SweepBeat(
                    row.replica,
                    last,
                    from_epoch(row.last_ok_at),
                    row.duration_s,
                    row.runs,
                    row.error,
                )
            )
        return result
