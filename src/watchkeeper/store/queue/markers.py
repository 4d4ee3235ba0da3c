"""The interrupted marker a start-up reconciliation puts on tasks a restart cut off."""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, Update, exists, or_, select, update
from sqlalchemy.exc import DBAPIError

from watchkeeper.clock import rfc3339, to_epoch
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.recovery import lease_lapsed
from watchkeeper.store.queue.rows import META, RUNNING, R, T
from watchkeeper.store.schema.queue import queue_tasks

log = logging.getLogger(__name__)

#: The metadata key a start-up reconciliation sets on a task a restart interrupted.
INTERRUPTED = "interrupted_at"


class Markers(Part):
    """Sets, reads and clears ``interrupted_at`` in a task's metadata."""

    def mark_interrupted(self, now: datetime, gone_runners: Collection[str]) -> list[str]:
        """Mark the running tasks whose runner is gone ``interrupted_at`` (RFC 3339 UTC).

        A running task's runner is gone when its lease lapsed by ``now``, when
        its runner is one of ``gone_runners`` (the queue's liveness rule says
        which), or when no registered runner holds it. A task a live runner
        holds is never marked, so a restart leaves another replica's runners
        alone. A task already marked keeps its first marker. Returns the ids
        newly marked.

        Each task's write is a savepoint of its own: a write the database
        refuses (or metadata that is not an object) costs that task its marker,
        logged, not every other task theirs.
        """
        stamp = rfc3339(now)
        # The UPDATE repeats the whole condition: a task leased again by a
        # live runner since the read is no longer a task of a runner that is gone.
        scope = (T.status == RUNNING) & _gone(to_epoch(now), gone_runners)
        marked: list[str] = []
        with self._write("marking interrupted tasks") as conn:
            rows = conn.execute(select(T.id, META).where(scope)).all()
            for row in rows:
                meta = row._mapping["metadata"] or {}
                if not isinstance(meta, dict):
                    _tell("marking", row.id, f"its metadata is not an object: {meta!r}")
                    continue
                if meta.get(INTERRUPTED):
                    continue
                change = update(queue_tasks).where(T.id == row.id, scope)
                if _apply(
                    conn, row.id, change.values({META: {**meta, INTERRUPTED: stamp}}), "marking"
                ):
                    marked.append(row.id)
        return marked

    def interrupted(self, task_ids: Collection[str]) -> dict[str, str]:
        """``interrupted_at`` of each of ``task_ids`` that carries the marker."""
        if not task_ids:
            return {}
        statement = select(T.id, META).where(T.id.in_(list(task_ids)), META.is_not(None))
        with self._read("reading task markers") as conn:
            rows = conn.execute(statement).all()
        found: dict[str, str] = {}
        for row in rows:
            meta = row._mapping["metadata"]
            if isinstance(meta, dict) and meta.get(INTERRUPTED):
                found[row.id] = str(meta[INTERRUPTED])
        return found

    def clear_interrupted(self, task_ids: Collection[str], now: datetime) -> list[str]:
        """Remove the marker from those of ``task_ids`` that carry it (they run again).

        Returns the ids whose marker this call removed: a concurrent call never
        reports the same removal. Reads first, so an unmarked task costs no write.

        Best effort: it follows a lease or renewal that has committed, and must
        never turn that into an error answer (the runner would never learn of
        the lease it holds). A removal the database refuses is logged and left
        for the next renewal to try again; so is a store that cannot be reached.
        """
        try:
            return self._clear(task_ids, now)
        except Exception as exc:  # noqa: BLE001 - the lease or renewal before it stands
            log.warning(
                "Could not clear the interrupted marker of %s: %s; the next renewal tries again",
                ", ".join(task_ids),
                exc,
                extra={"action": "queue_clear_interrupted"},
            )
            return []

    def _clear(self, task_ids: Collection[str], now: datetime) -> list[str]:
        if not self.interrupted(task_ids):
            return []
        at = to_epoch(now)
        removed: list[str] = []
        with self._write("clearing task markers") as conn:
            statement = select(T.id, META).where(T.id.in_(list(task_ids)), META.is_not(None))
            if not self._sqlite:
                statement = statement.with_for_update()
            for row in conn.execute(statement).all():
                meta = row._mapping["metadata"]
                if not isinstance(meta, dict) or not meta.get(INTERRUPTED):
                    continue
                rest = {key: value for key, value in meta.items() if key != INTERRUPTED}
                change = update(queue_tasks).where(T.id == row.id)
                if _apply(conn, row.id, change.values({META: rest, T.updated_at: at}), "clearing"):
                    removed.append(row.id)
        return removed


def _apply(conn: Connection, task_id: str, change: Update, doing: str) -> bool:
    """Run one task's marker write in a savepoint: whether it changed the row.

    A refused write rolls back to the savepoint, so the transaction goes on
    for the other tasks.
    """
    try:
        with conn.begin_nested():
            return bool(conn.execute(change).rowcount)
    except DBAPIError as exc:
        _tell(doing, task_id, str(exc.orig).strip().splitlines()[0])
        return False


def _tell(doing: str, task_id: str, why: str) -> None:
    log.warning(
        "Skipped %s the interrupted marker of task %s: %s",
        doing,
        task_id,
        why,
        extra={"action": "queue_interrupted_marker", "task_id": task_id},
    )


def _gone(at: float, gone_runners: Collection[str]) -> ColumnElement[bool]:
    """The task's holder is gone: its lease lapsed, its runner is gone, or it has none."""
    return or_(
        lease_lapsed(at),
        T.runner_id.in_(list(gone_runners)),
        T.runner_id.is_(None),
        ~exists().where(R.id == T.runner_id),
    )
