"""The timeline's store: events (append-only), spend rollups, record links, forge webhooks.

Events are inserted in one ``executemany`` per batch; nothing updates or
deletes them. Spend is summed from the events that were priced (or found
unpriced) when they arrived.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, case, delete, func, insert, or_, select, true, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.errors import StoreError
from watchkeeper.records.filling import UnreadableValue
from watchkeeper.records.timeline import Fact, Price, TimelineEvent, Usage
from watchkeeper.store.base import Accessor, insert_ignoring_duplicates, record_from_row
from watchkeeper.store.schema.queue import queue_jobs
from watchkeeper.store.schema.timeline import (
    forge_deliveries,
    forge_requests,
    timeline_events,
    timeline_links,
)
from watchkeeper.store.unreadable import each_readable, tell_once

_E = timeline_events.c
#: The columns a new event row fills, in the order :meth:`TimelineStore.append_values`
#: takes them.
INSERTED = tuple(column.name for column in timeline_events.c if column.name != "id")
assert INSERTED[:2] == ("org", "job_id")  # _fill_orgs reads both and replaces the first
_VALUES = operator.itemgetter(*INSERTED)
_L = timeline_links.c
#: What spend may be grouped by, and the column each groups on. A model is named as the
#: price table named it when it priced (or looked up) the call, so the spellings reporters
#: use for one model are one group; a call never looked up is grouped by its name lowercased.
SPEND_KEYS = {
    "org": _E.org,
    "job": _E.job_id,
    "role": _E.role,
    "model": func.lower(func.coalesce(_E.price_model, _E.model)),
    "provider": _E.provider,
    "day": _E.day,
}


def event_from_mapping(m: Mapping[Any, Any], *, check: bool = False) -> TimelineEvent:
    """A stored row (or the row about to be stored) as a record; ``check`` checks each
    value against its field's type (a stored row read back)."""
    version = m["price_version"]
    return record_from_row(
        TimelineEvent,
        m,
        times=("at", "received_at"),
        check=check,
        usage=Usage(
            m["input_tokens"], m["output_tokens"], m["cache_read_tokens"], m["cache_write_tokens"]
        ),
        price=Price(
            m["cost"],
            bool(m["unpriced"]),
            m["price_model"] if version else m["model"],
            m["price_provider"] if version else m["provider"],
            version,
        ),
    )


def _event(row: Row[Any]) -> TimelineEvent:
    return event_from_mapping(row._mapping, check=True)


def _link(row: Row[Any]) -> dict[str, Any]:
    try:
        at = from_epoch(row.at)
    except ValueError as exc:
        raise UnreadableValue("at", row.at, str(exc)) from None
    return {
        "kind": row.kind,
        "url": row.url,
        "title": row.title,
        "actor": row.actor,
        "at": at,
        "detail": row.detail,
        "signature": row.signature,
    }


@dataclass(frozen=True, slots=True)
class SpendGroup:
    """The spend of one group: calls, unpriced calls, cost and tokens.

    ``cost`` is ``None`` when no call of the group was priced: unknown, not free.
    """

    key: str | None
    calls: int
    unpriced: int
    cost: float | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    #: When the group's first and last calls were made.
    first_at: datetime | None = None
    last_at: datetime | None = None


def _group(row: tuple[Any, ...]) -> SpendGroup:
    key, calls, unpriced, cost, inp, out, read, write, first, last = row
    return SpendGroup(
        None if key is None else str(key),
        int(calls),
        int(unpriced),
        None if cost is None else float(cost),
        int(inp),
        int(out),
        int(read),
        int(write),
        _when(key, first),
        _when(key, last),
    )


def _when(key: Any, at: Any) -> datetime | None:
    """A group's first or last call; unknown (``None``, logged once) when an event's stored
    time is no time: the group's sums still read."""
    try:
        return None if at is None else from_epoch(float(at))
    except (ValueError, TypeError) as exc:
        tell_once(
            f"a timeline_events row of spend group {key}",
            exc,
            "The group shows no first or last call",
        )
        return None


def _copy(conn: Connection, values: Sequence[tuple[Any, ...]]) -> None:
    import psycopg

    raw: Any = conn.connection.dbapi_connection
    statement = f"COPY {timeline_events.name} ({', '.join(INSERTED)}) FROM STDIN"
    try:
        with raw.cursor() as cursor, cursor.copy(statement) as copy:
            for row in values:
                copy.write_row(row)
    except psycopg.Error as exc:  # a raw cursor's errors are not wrapped by SQLAlchemy
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"database error while storing timeline events: {first}") from exc


class TimelineStore(Accessor):
    """Reads and appends timeline rows; one transaction per call."""

    # Events --------------------------------------------------------------------------

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert a batch of event rows, all or nothing; a missing org is the job's.

        Each row filled from its job gets that org too, as :meth:`append_values` does.
        """
        if not rows:
            return
        values = list(map(_VALUES, rows))
        self.append_values(values)
        for row, stored in zip(rows, values, strict=True):
            row["org"] = stored[0]

    def append_values(self, values: list[tuple[Any, ...]]) -> None:
        """Insert rows given as tuples in :data:`INSERTED` order, all or nothing.

        A row without an org gets its job's: its tuple in ``values`` is replaced by one
        with that org, so the caller sees what was stored. The rows are plain values
        already, so they go straight to the driver: its own ``executemany`` on SQLite,
        ``COPY ... FROM STDIN`` on PostgreSQL. SQLAlchemy's per-row parameter processing
        would cost more than the insert itself.
        """
        if not values:
            return
        with self._write("storing timeline events") as conn:
            self._fill_orgs(conn, values)
            if self._sqlite:
                conn.exec_driver_sql(self._insert_sql, values)
            else:
                _copy(conn, values)

    @property
    def _insert_sql(self) -> str:
        marker = "?" if self._engine.dialect.paramstyle == "qmark" else "%s"
        # Names from the declared schema, values as parameters: nothing from a request.
        return (
            f"INSERT INTO {timeline_events.name} ({', '.join(INSERTED)}) "  # noqa: S608
            f"VALUES ({', '.join(marker for _ in INSERTED)})"
        )

    def _fill_orgs(self, conn: Connection, values: list[tuple[Any, ...]]) -> None:
        wanted = {row[1] for row in values if row[0] is None and row[1]}
        if not wanted:
            return
        statement = select(queue_jobs.c.id, queue_jobs.c.org).where(queue_jobs.c.id.in_(wanted))
        orgs: dict[str, str] = dict(conn.execute(statement).all())
        for i, row in enumerate(values):
            if row[0] is None and row[1] in orgs:
                values[i] = (orgs[row[1]], *row[1:])

    def events(
        self, *, job_id: str | None = None, task_id: str | None = None, limit: int = 10_000
    ) -> list[TimelineEvent]:
        """Events of a job and/or a task, oldest first."""
        statement = select(timeline_events).order_by(_E.at, _E.id).limit(limit)
        if job_id is not None:
            statement = statement.where(_E.job_id == job_id)
        if task_id is not None:
            statement = statement.where(_E.task_id == task_id)
        with self._read("reading a timeline") as conn:
            return list(each_readable("timeline_events", conn.execute(statement), _event))

    def progress_facts(self, task_ids: Sequence[str]) -> dict[str, list[Fact]]:
        """``(at, round, fingerprint)`` of every event of each task, oldest first."""
        statement = (
            select(_E.task_id, _E.at, _E.round, _E.fingerprint)
            .where(_E.task_id.in_(list(task_ids)))
            .order_by(_E.task_id, _E.at, _E.id)
        )
        facts: dict[str, list[Fact]] = {}
        with self._read("reading task progress") as conn:
            for task_id, at, number, fingerprint in conn.execute(statement):
                facts.setdefault(task_id, []).append((at, number, fingerprint))
        return facts

    def has_events(self, job_id: str) -> bool:
        """Whether any event names ``job_id``."""
        statement = select(_E.id).where(_E.job_id == job_id).limit(1)
        with self._read("reading a timeline") as conn:
            return conn.execute(statement).first() is not None

    # Spend ---------------------------------------------------------------------------

    def spend(
        self,
        by: str,
        *,
        org: str | None = None,
        job_id: str | None = None,
        job_ids: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[SpendGroup]:
        """Spend grouped by ``by`` (a key of :data:`SPEND_KEYS`), costliest first.

        ``job_ids`` narrows it to those jobs' calls: grouped ``by`` job, a list of jobs
        gets the spend of each in one query. ``since`` (included) and ``until`` (left out)
        narrow it to the calls made between those times.
        """
        column = SPEND_KEYS[by]
        statement = (
            select(
                column,
                func.count(),
                func.coalesce(func.sum(case((_E.unpriced == true(), 1), else_=0)), 0),
                func.sum(_E.cost),
                func.coalesce(func.sum(_E.input_tokens), 0),
                func.coalesce(func.sum(_E.output_tokens), 0),
                func.coalesce(func.sum(_E.cache_read_tokens), 0),
                func.coalesce(func.sum(_E.cache_write_tokens), 0),
                func.min(_E.at),
                func.max(_E.at),
            )
            .where(or_(_E.cost.is_not(None), _E.unpriced == true()))
            .group_by(column)
        )
        for value, col in ((org, _E.org), (job_id, _E.job_id)):
            if value is not None:
                statement = statement.where(col == value)
        if job_ids is not None:
            statement = statement.where(_E.job_id.in_(list(job_ids)))
        if since is not None:
            statement = statement.where(_E.at >= to_epoch(since))
        if until is not None:
            statement = statement.where(_E.at < to_epoch(until))
        with self._read("summing spend") as conn:
            groups = [_group(tuple(row)) for row in conn.execute(statement)]
        return sorted(groups, key=lambda group: (-(group.cost or 0.0), str(group.key)))

    # Record links --------------------------------------------------------------------

    def links(self, job_id: str) -> list[dict[str, Any]]:
        """Links appended to a job's record, oldest first."""
        statement = select(timeline_links).where(_L.job_id == job_id).order_by(_L.at, _L.id)
        with self._read("reading record links") as conn:
            return list(each_readable("timeline_links", conn.execute(statement), _link))

    def job_known(self, job_id: str) -> bool:
        """Whether the queue holds the job or the timeline names it."""
        statement = select(queue_jobs.c.id).where(queue_jobs.c.id == job_id)
        with self._read("reading a job") as conn:
            if conn.execute(statement).first() is not None:
                return True
        return self.has_events(job_id)

    # Forge deliveries ----------------------------------------------------------------

    def _claim(self, conn: Connection, source: str, delivery_id: str, at: float) -> bool:
        statement = insert_ignoring_duplicates(self._engine, forge_deliveries).values(
            source=source, delivery_id=delivery_id[:200], received_at=at
        )
        claimed = statement.on_conflict_do_nothing().returning(forge_deliveries.c.source)
        return conn.execute(claimed).first() is not None

    def record_links(
        self, source: str, delivery_id: str, links: Sequence[dict[str, Any]], now: datetime
    ) -> bool:
        """Append ``links`` once per delivery; ``False`` when the delivery was seen before."""
        at = to_epoch(now)
        with self._write("recording a webhook") as conn:
            if not self._claim(conn, source, delivery_id, at):
                return False
            if links:
                conn.execute(insert(timeline_links), [{**link, "at": at} for link in links])
        return True

    def claim_request(
        self,
        source: str,
        delivery_id: str,
        external_id: str,
        title: str,
        detail: dict[str, Any],
        now: datetime,
    ) -> str:
        """Claim a job request: ``new``, ``duplicate`` (delivery seen) or ``known`` (item seen)."""
        at = to_epoch(now)
        with self._write("recording a webhook") as conn:
            if not self._claim(conn, source, delivery_id, at):
                return "duplicate"
            statement = insert_ignoring_duplicates(self._engine, forge_requests).values(
                source=source,
                external_id=external_id[:200],
                title=title[:500],
                status="pending",
                detail=detail,
                created_at=at,
                updated_at=at,
            )
            claimed = statement.on_conflict_do_nothing().returning(forge_requests.c.source)
            if conn.execute(claimed).first() is None:
                return "known"
        return "new"

    def settle_request(
        self,
        source: str,
        external_id: str,
        *,
        job_id: str | None,
        reason: str | None,
        now: datetime,
    ) -> None:
        """Record the job a request became (``submitted``), or why it waits (``pending``)."""
        values = {
            "status": "submitted" if job_id else "pending",
            "job_id": job_id,
            "reason": None if reason is None else reason[:2000],
            "updated_at": to_epoch(now),
        }
        key = (forge_requests.c.source == source) & (forge_requests.c.external_id == external_id)
        with self._write("recording a job request") as conn:
            conn.execute(update(forge_requests).where(key).values(**values))

    def forget_request(self, source: str, delivery_id: str, external_id: str) -> None:
        """Undo a claim whose job could not be submitted, so the sender's retry is handled."""
        request_key = (forge_requests.c.source == source) & (
            forge_requests.c.external_id == external_id
        )
        delivery_key = (forge_deliveries.c.source == source) & (
            forge_deliveries.c.delivery_id == delivery_id[:200]
        )
        with self._write("forgetting a request") as conn:
            conn.execute(delete(forge_requests).where(request_key))
            conn.execute(delete(forge_deliveries).where(delivery_key))

    def requests(self, source: str) -> list[dict[str, Any]]:
        """Job requests from ``source``, oldest first."""
        statement = (
            select(forge_requests)
            .where(forge_requests.c.source == source)
            .order_by(forge_requests.c.created_at)
        )
        with self._read("reading job requests") as conn:
            return [dict(row._mapping) for row in conn.execute(statement)]
