"""Silences and acknowledgements as stored. What a silence matches lives in ``watch/``."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from watchkeeper.clock import to_epoch
from watchkeeper.errors import NotFound
from watchkeeper.store.base import Accessor, record_from_row
from watchkeeper.store.incidents import _event
from watchkeeper.store.listen import announce
from watchkeeper.store.queueing import NewDelivery, insert_deliveries
from watchkeeper.store.schema.silences import incident_acks, silenced_incidents, silences

_TIMES = ("created_at", "starts_at", "ends_at", "announced_at")


@dataclass(frozen=True, slots=True)
class Matchers:
    """Which work a silence covers: every matcher given must match."""

    kind: str | None = None
    run_id: str | None = None
    title_pattern: str | None = None
    title_syntax: str | None = None  # glob or regex, with a title pattern
    origin: str | None = None  # platform:chat or platform:chat/thread


@dataclass(frozen=True, slots=True)
class NewSilence:
    """A silence to create."""

    matchers: Matchers
    comment: str
    created_by: str
    created_via: str
    starts_at: datetime
    ends_at: datetime


@dataclass(frozen=True, slots=True)
class Silence:
    """One silence as stored; ``ends_at`` is moved to the moment it was expired early."""

    id: int
    kind: str | None
    run_id: str | None
    title_pattern: str | None
    title_syntax: str | None
    origin: str | None
    comment: str
    created_by: str
    created_via: str
    created_at: datetime
    starts_at: datetime
    ends_at: datetime
    expired_by: str | None
    announced_at: datetime | None

    @property
    def matchers(self) -> Matchers:
        """What it matches."""
        return Matchers(self.kind, self.run_id, self.title_pattern, self.title_syntax, self.origin)

    def active_at(self, at: datetime) -> bool:
        """Whether it silences what happens at ``at``."""
        return self.starts_at <= at < self.ends_at


@dataclass(frozen=True, slots=True)
class Ack:
    """Who said "I am on it" for one episode of an incident, on which channel, and when."""

    incident_id: int
    episode: int
    actor: str
    via: str
    at: datetime


class SilenceStore(Accessor):
    """Create, read and expire silences; remember what each held back; queue its expiry once."""

    def create(self, new: NewSilence, now: datetime) -> Silence:
        """Store ``new``; the stored silence."""
        m = new.matchers
        values = {
            "kind": m.kind,
            "run_id": m.run_id,
            "title_pattern": m.title_pattern,
            "title_syntax": m.title_syntax,
            "origin": m.origin,
            "comment": new.comment[:2000],
            "created_by": new.created_by[:200],
            "created_via": new.created_via[:32],
            "created_at": to_epoch(now),
            "starts_at": to_epoch(new.starts_at),
            "ends_at": to_epoch(new.ends_at),
        }
        with self._write("creating a silence") as conn:
            silence_id = conn.execute(insert(silences).values(**values)).inserted_primary_key
            assert silence_id is not None
            row = conn.execute(select(silences).where(silences.c.id == silence_id[0])).one()
        return record_from_row(Silence, row, times=_TIMES)

    def get(self, silence_id: int) -> Silence:
        """One silence, or :class:`NotFound`."""
        with self._read("reading a silence") as conn:
            row = conn.execute(select(silences).where(silences.c.id == silence_id)).first()
        if row is None:
            raise NotFound(f"no silence {silence_id}; list them with `watchkeeper silence list`")
        return record_from_row(Silence, row, times=_TIMES)

    def list(self, active_at: datetime | None = None, limit: int = 200) -> builtins.list[Silence]:
        """Silences, newest first; with ``active_at`` only those active then."""
        statement = select(silences).order_by(silences.c.id.desc()).limit(limit)
        if active_at is not None:
            at = to_epoch(active_at)
            statement = statement.where(silences.c.starts_at <= at, silences.c.ends_at > at)
        with self._read("listing silences") as conn:
            return [record_from_row(Silence, row, times=_TIMES) for row in conn.execute(statement)]

    def expire(self, silence_id: int, by: str, now: datetime) -> bool:
        """End a silence now; False when it had already ended."""
        at = to_epoch(now)
        statement = (
            update(silences)
            .where(silences.c.id == silence_id, silences.c.ends_at > at)
            .values(ends_at=at, expired_by=by[:200])
        )
        with self._write("expiring a silence") as conn:
            return bool(conn.execute(statement).rowcount)

    def cover(self, silence_id: int, incident_id: int, now: datetime) -> None:
        """Remember that ``silence_id`` held back a message of ``incident_id`` (once)."""
        with self._write("recording a silenced incident") as conn:
            dialect = postgresql_insert if conn.dialect.name == "postgresql" else sqlite_insert
            conn.execute(
                dialect(silenced_incidents)
                .values(silence_id=silence_id, incident_id=incident_id, at=to_epoch(now))
                .on_conflict_do_nothing()
            )

    def covered(self, silence_id: int) -> builtins.list[int]:
        """The incidents whose messages ``silence_id`` held back, oldest first."""
        statement = (
            select(silenced_incidents.c.incident_id)
            .where(silenced_incidents.c.silence_id == silence_id)
            .order_by(silenced_incidents.c.incident_id)
        )
        with self._read("reading silenced incidents") as conn:
            return [int(row.incident_id) for row in conn.execute(statement)]

    def ended_unannounced(self, now: datetime, limit: int = 100) -> builtins.list[Silence]:
        """Silences that have ended and whose end is not yet queued, oldest first."""
        statement = (
            select(silences)
            .where(silences.c.ends_at <= to_epoch(now), silences.c.announced_at.is_(None))
            .order_by(silences.c.id)
            .limit(limit)
        )
        with self._read("reading ended silences") as conn:
            return [record_from_row(Silence, row, times=_TIMES) for row in conn.execute(statement)]

    def mark_announced(self, silence_id: int, items: Sequence[NewDelivery], now: datetime) -> int:
        """Queue ``items`` and mark the silence announced, in one transaction; how many
        deliveries were new (none when another pass got there first)."""
        at = to_epoch(now)
        with self._write("announcing a silence's end") as conn:
            marked = conn.execute(
                update(silences)
                .where(silences.c.id == silence_id, silences.c.announced_at.is_(None))
                .values(announced_at=at)
            ).rowcount
            if not marked:
                return 0
            created = len(insert_deliveries(conn, items, at))
            if created:
                announce(conn)
        return created


class AckStore(Accessor):
    """Who is looking at which incident."""

    def acknowledge(
        self, incident_id: int, episode: int, actor: str, via: str, now: datetime
    ) -> bool:
        """Record that ``actor`` is on it; False when they already were for this episode."""
        at = to_epoch(now)
        assert at is not None
        with self._write("acknowledging an incident") as conn:
            found = conn.execute(
                select(incident_acks).where(incident_acks.c.incident_id == incident_id)
            ).first()
            if found is not None and found.episode == episode and found.actor == actor[:200]:
                return False
            conn.execute(delete(incident_acks).where(incident_acks.c.incident_id == incident_id))
            conn.execute(
                insert(incident_acks).values(
                    incident_id=incident_id,
                    episode=episode,
                    actor=actor[:200],
                    via=via[:32],
                    at=at,
                )
            )
            _event(conn, incident_id, at, "acknowledged", f"{actor} is on it")
        return True

    def for_incidents(self, incident_ids: Sequence[int]) -> dict[int, Ack]:
        """The acknowledgement of each of ``incident_ids`` that has one (any episode)."""
        found: dict[int, Ack] = {}
        ids = list(incident_ids)
        with self._read("reading acknowledgements") as conn:
            for chunk in range(0, len(ids), 500):
                rows = conn.execute(
                    select(incident_acks).where(
                        incident_acks.c.incident_id.in_(ids[chunk : chunk + 500])
                    )
                )
                for row in rows:
                    found[int(row.incident_id)] = record_from_row(Ack, row, times=("at",))
        return found
