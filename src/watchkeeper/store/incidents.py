"""Incidents and their append-only history. The rules of when to open one live in ``watch/``."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, func, insert, select, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.errors import NotFound
from watchkeeper.records.filling import UnreadableValue, enum_of
from watchkeeper.store.base import Accessor, record_from_row
from watchkeeper.store.incident_query import IncidentQuery, conditions
from watchkeeper.store.listen import announce
from watchkeeper.store.schema import incident_events, incidents
from watchkeeper.store.unreadable import each_readable, read_or_refuse


class IncidentStatus(StrEnum):
    """An incident is open, recovered (the work moved again; it may reopen) or resolved."""

    OPEN = "open"
    RECOVERED = "recovered"
    RESOLVED = "resolved"


LIVE_STATUSES = (IncidentStatus.OPEN.value, IncidentStatus.RECOVERED.value)
#: A renewal needs the episode still open and decided: a second replica renewing the same
#: episode finds the decision already cleared and changes nothing.
_RENEWABLE = (
    incidents.c.status == IncidentStatus.OPEN.value,
    incidents.c.decided_at.is_not(None),
)


@dataclass(frozen=True, slots=True)
class IncidentKey:
    """An incident's identity: one per piece of work, condition and failure fingerprint."""

    kind: str
    run_id: str
    condition: str
    fingerprint: str = ""


@dataclass(frozen=True, slots=True)
class IncidentEvent:
    """One line of an incident's history."""

    at: datetime
    type: str
    detail: str | None


@dataclass(frozen=True, slots=True)
class Decision:
    """Who decided an incident, how, where and when."""

    action: str
    actor: str
    via: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Incident:
    """One incident as stored."""

    id: int
    key: IncidentKey
    status: IncidentStatus
    title: str
    reason: str
    since: datetime
    opened_at: datetime
    updated_at: datetime
    resolved_at: datetime | None
    resolution: str | None
    state_token: str
    origin: dict[str, str] | None
    effects: str
    episodes: int
    decision: Decision | None = None
    suppressed: bool = False
    events: tuple[IncidentEvent, ...] = field(default=())

    @classmethod
    def from_row(cls, row: Row[Any], events: tuple[IncidentEvent, ...] = ()) -> Incident:
        """Build from an ``incidents`` row."""
        m = row._mapping
        return record_from_row(
            cls,
            row,
            times=("since", "opened_at", "updated_at", "resolved_at"),
            check=True,
            key=IncidentKey(m["kind"], m["run_id"], m["condition"], m["fingerprint"]),
            status=enum_of(IncidentStatus, m, "status"),
            decision=_decision(m),
            suppressed=bool(m["suppressed"]),
            events=events,
        )


@dataclass(frozen=True, slots=True)
class Opening:
    """A verdict that should have a live incident."""

    key: IncidentKey
    title: str
    reason: str
    since: datetime
    state_token: str
    origin: dict[str, str] | None
    effects: str


@dataclass(frozen=True, slots=True)
class Changes:
    """Everything one sweep changes about incidents, applied in one transaction."""

    openings: Sequence[Opening] = ()
    recoveries: Sequence[tuple[int, str]] = ()
    resolutions: Sequence[tuple[int, str]] = ()
    token_updates: Sequence[tuple[int, str]] = ()
    renewals: Sequence[Opening] = ()

    def __bool__(self) -> bool:
        return bool(
            self.openings
            or self.recoveries
            or self.resolutions
            or self.token_updates
            or self.renewals
        )


@dataclass(frozen=True, slots=True)
class Applied:
    """What applying :class:`Changes` did, by incident id."""

    opened: tuple[int, ...] = ()
    reopened: tuple[int, ...] = ()
    recovered: tuple[int, ...] = ()
    resolved: tuple[int, ...] = ()


def _decision(m: Any) -> Decision | None:
    try:
        decided_at = from_epoch(m["decided_at"])
    except ValueError as exc:
        raise UnreadableValue("decided_at", m["decided_at"], str(exc)) from None
    if decided_at is None:
        return None
    return Decision(m["decided_action"], m["decided_by"], m["decided_via"], decided_at)


class IncidentStore(Accessor):
    """Reads and writes incidents; every change leaves an event."""

    def live(self, kinds: Sequence[str]) -> list[Incident]:
        """Open and recovered incidents of ``kinds``."""
        statement = select(incidents).where(
            incidents.c.status.in_(LIVE_STATUSES), incidents.c.kind.in_(list(kinds))
        )
        with self._read("reading live incidents") as conn:
            rows = conn.execute(statement)
            return [read_or_refuse("incidents", row, Incident.from_row) for row in rows]

    def live_for_run(self, kind: str, run_id: str) -> list[Incident]:
        """Open and recovered incidents of one run (read through the incident key's index)."""
        statement = select(incidents).where(
            incidents.c.kind == kind,
            incidents.c.run_id == run_id,
            incidents.c.status.in_(LIVE_STATUSES),
        )
        with self._read("reading the run's live incidents") as conn:
            rows = conn.execute(statement)
            return [read_or_refuse("incidents", row, Incident.from_row) for row in rows]

    def apply(self, changes: Changes, now: datetime) -> Applied:
        """Apply one sweep's changes atomically."""
        at = to_epoch(now)
        assert at is not None
        with self._write("recording incidents") as conn:
            opened, reopened = self._open(conn, changes.openings, at)
            renewed = self._existing(conn, [o.key for o in changes.renewals])
            for opening in changes.renewals:
                found = renewed.get(opening.key)
                if (
                    found is not None
                    and not found.suppressed
                    and self._reopen(conn, found.id, opening, at, _RENEWABLE)
                ):
                    reopened.append(found.id)
            recovered = self._move(
                conn, changes.recoveries, at, IncidentStatus.RECOVERED, "moved_again"
            )
            resolved = self._move(
                conn, changes.resolutions, at, IncidentStatus.RESOLVED, "resolved"
            )
            for incident_id, token in changes.token_updates:
                conn.execute(
                    update(incidents)
                    .where(incidents.c.id == incident_id)
                    .values(state_token=token, updated_at=at)
                )
        return Applied(tuple(opened), tuple(reopened), tuple(recovered), tuple(resolved))

    def _open(
        self, conn: Connection, openings: Sequence[Opening], at: float
    ) -> tuple[list[int], list[int]]:
        existing = self._existing(conn, [o.key for o in openings])
        fresh = [o for o in openings if o.key not in existing]
        opened = self._insert_many(conn, fresh, at)
        reopened: list[int] = []
        for opening in openings:
            found = existing.get(opening.key)
            if found is None or found.suppressed:
                continue  # new (inserted above), or dismissed: never reported again
            if found.status != IncidentStatus.OPEN.value and self._reopen(
                conn, found.id, opening, at, (incidents.c.status == found.status,)
            ):
                reopened.append(found.id)
        return opened, reopened

    def _existing(self, conn: Connection, keys: Sequence[IncidentKey]) -> dict[IncidentKey, Any]:
        found: dict[IncidentKey, Any] = {}
        wanted = set(keys)
        run_ids = sorted({key.run_id for key in keys})
        for chunk in range(0, len(run_ids), 500):
            rows = conn.execute(
                select(
                    incidents.c.id,
                    incidents.c.kind,
                    incidents.c.run_id,
                    incidents.c.condition,
                    incidents.c.fingerprint,
                    incidents.c.status,
                    incidents.c.suppressed,
                ).where(incidents.c.run_id.in_(run_ids[chunk : chunk + 500]))
            )
            for row in rows:
                key = IncidentKey(row.kind, row.run_id, row.condition, row.fingerprint)
                if key in wanted:
                    found[key] = row
        return found

    def _insert_many(self, conn: Connection, openings: Sequence[Opening], at: float) -> list[int]:
        if not openings:
            return []
        rows = [
            {
                "kind": o.key.kind,
                "run_id": o.key.run_id,
                "condition": o.key.condition,
                "fingerprint": o.key.fingerprint,
                "status": IncidentStatus.OPEN.value,
                "title": o.title,
                "reason": o.reason,
                "since": to_epoch(o.since),
                "opened_at": at,
                "updated_at": at,
                "state_token": o.state_token,
                "origin": o.origin,
                "effects": o.effects,
                "episodes": 1,
                "suppressed": False,
            }
            for o in openings
        ]
        statement = insert(incidents).returning(incidents.c.id, sort_by_parameter_order=True)
        ids = [int(row.id) for row in conn.execute(statement, rows)]
        conn.execute(
            insert(incident_events),
            [
                {"incident_id": i, "at": at, "type": "opened", "detail": o.reason[:2000]}
                for i, o in zip(ids, openings, strict=True)
            ],
        )
        announce(conn)
        return ids

    def _reopen(
        self,
        conn: Connection,
        incident_id: int,
        opening: Opening,
        at: float,
        guard: Sequence[ColumnElement[bool]],
    ) -> bool:
        """Start a new episode if the row still holds the state ``guard`` names; whether it did.

        The guard is the state the caller read: under PostgreSQL's read committed
        another replica may reopen the same row between that read and this write,
        and then this UPDATE finds its row changed and does nothing.
        """
        changed = conn.execute(
            update(incidents)
            .where(incidents.c.id == incident_id, *guard)
            .values(
                status=IncidentStatus.OPEN.value,
                reason=opening.reason,
                since=to_epoch(opening.since),
                updated_at=at,
                resolved_at=None,
                resolution=None,
                state_token=opening.state_token,
                episodes=incidents.c.episodes + 1,
                # A new episode needs a new decision.
                decided_at=None,
                decided_by=None,
                decided_via=None,
                decided_action=None,
            )
        ).rowcount
        if changed:
            _event(conn, incident_id, at, "reopened", opening.reason)
        return bool(changed)

    def _move(
        self,
        conn: Connection,
        moves: Sequence[tuple[int, str]],
        at: float,
        status: IncidentStatus,
        event_type: str,
    ) -> list[int]:
        done: list[int] = []
        resolved = status is IncidentStatus.RESOLVED
        for incident_id, note in moves:
            values: dict[str, Any] = {"status": status.value, "updated_at": at}
            if resolved:
                values.update(resolved_at=at, resolution=note[:500])
            moved = conn.execute(
                update(incidents)
                .where(incidents.c.id == incident_id, incidents.c.status != status.value)
                .values(**values)
            ).rowcount
            if moved:
                _event(conn, incident_id, at, event_type, note)
                done.append(incident_id)
        return done

    def list(self, status: str | None = None, limit: int = 200, offset: int = 0) -> list[Incident]:
        """Incidents, newest first; ``status`` ``live`` means open or recovered."""
        return self.search(IncidentQuery(status=status), limit, offset, count=False)[0]

    def search(
        self, query: IncidentQuery, limit: int = 200, offset: int = 0, *, count: bool = True
    ) -> tuple[builtins.list[Incident], int]:
        """The incidents ``query`` finds, newest first, one page; and (``count``) how many
        it finds in all (``0`` when not counted)."""
        where = conditions(query)
        page = select(incidents).where(*where).order_by(incidents.c.id.desc())
        with self._read("listing incidents") as conn:
            rows = conn.execute(page.limit(limit).offset(offset))
            found = list(each_readable("incidents", rows, Incident.from_row))
            total = 0
            if count:
                counted = select(func.count()).select_from(incidents).where(*where)
                total = int(conn.execute(counted).scalar_one())
        return found, total

    def get(self, incident_id: int, *, with_events: bool = True) -> Incident:
        """One incident (with its history unless told otherwise), or :class:`NotFound`."""
        with self._read("reading an incident") as conn:
            row = conn.execute(select(incidents).where(incidents.c.id == incident_id)).first()
            if row is None:
                raise NotFound(f"no incident {incident_id}; list them with `watchkeeper incidents`")
            if not with_events:
                return read_or_refuse("incidents", row, Incident.from_row)
            events = conn.execute(
                select(incident_events)
                .where(incident_events.c.incident_id == incident_id)
                .order_by(incident_events.c.id)
            ).all()
        history = tuple(each_readable("incident_events", events, _history_line))
        return read_or_refuse("incidents", row, lambda found: Incident.from_row(found, history))

    def add_event(self, incident_id: int, now: datetime, event_type: str, detail: str) -> None:
        """Append one line to an incident's history."""
        with self._write("recording an incident event") as conn:
            _event(conn, incident_id, to_epoch(now), event_type, detail)

    def events_after(
        self, event_id: int, limit: int = 500, since: datetime | None = None
    ) -> Sequence[tuple[int, int, IncidentEvent]]:
        """History lines newer than ``event_id`` (and ``since``), oldest first:
        ``(event id, incident id, event)``."""
        statement = (
            select(incident_events)
            .where(incident_events.c.id > event_id)
            .order_by(incident_events.c.id)
            .limit(limit)
        )
        if since is not None:
            statement = statement.where(incident_events.c.at >= to_epoch(since))
        with self._read("reading incident events") as conn:
            rows = conn.execute(statement).all()
        return list(each_readable("incident_events", rows, _numbered_line))

    def unrouted(self, limit: int = 500) -> Sequence[tuple[int, int, IncidentEvent]]:
        """History lines not yet routed, oldest first: ``(event id, incident id, event)``.

        Read by the durable mark, not by an id cursor: an event whose transaction
        commits after a higher id's is still unrouted, and is read on the next pass.
        """
        statement = (
            select(incident_events)
            .where(incident_events.c.routed_at.is_(None))
            .order_by(incident_events.c.id)
            .limit(limit)
        )
        with self._read("reading unrouted incident events") as conn:
            rows = conn.execute(statement).all()
        return [read_or_refuse("incident_events", row, _numbered_line) for row in rows]

    def count_by_status(self) -> dict[str, int]:
        """How many incidents there are in each status."""
        statement = select(incidents.c.status, func.count()).group_by(incidents.c.status)
        with self._read("counting incidents") as conn:
            return {row[0]: int(row[1]) for row in conn.execute(statement)}


def _history_line(row: Any) -> IncidentEvent:
    """One line of an incident's history; :class:`UnreadableValue` when its time is none."""
    try:
        return IncidentEvent(from_epoch(row.at), row.type, row.detail)
    except ValueError as exc:
        raise UnreadableValue("at", row.at, str(exc)) from None


def _numbered_line(row: Any) -> tuple[int, int, IncidentEvent]:
    return row.id, row.incident_id, _history_line(row)


def _event(conn: Connection, incident_id: int, at: float, event_type: str, detail: str) -> None:
    conn.execute(
        insert(incident_events).values(
            incident_id=incident_id, at=at, type=event_type, detail=detail[:2000]
        )
    )
    announce(conn)
