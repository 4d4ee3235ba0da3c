"""The interrupted marker a start-up reconciliation puts on tasks a restart cut off."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import ColumnElement, exists, or_, select, update

from watchkeeper.clock import rfc3339, to_epoch
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.recovery import lease_lapsed
from watchkeeper.store.queue.rows import META, RUNNING, R, T
from watchkeeper.store.schema_queue import queue_tasks

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
        """
        stamp = rfc3339(now)
        # The UPDATE repeats the whole condition: a task leased again by a
        # live runner since the read is no longer a task of a runner that is gone.
        scope = (T.status == RUNNING) & _gone(to_epoch(now), gone_runners)
        marked: list[str] = []
        with self._write("marking interrupted tasks") as conn:
            rows = conn.execute(select(T.id, META).where(scope)).all()
            for row in rows:
                meta = dict(row._mapping["metadata"] or {})
                if meta.get(INTERRUPTED):
                    continue
                meta[INTERRUPTED] = stamp
                done = conn.execute(
                    update(queue_tasks).where(T.id == row.id, scope).values({META: meta})
                )
                if done.rowcount:
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
        """
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
                conn.execute(
                    update(queue_tasks).where(T.id == row.id).values({META: rest, T.updated_at: at})
                )
                removed.append(row.id)
        return removed


def _gone(at: float, gone_runners: Collection[str]) -> ColumnElement[bool]:
    """The task's holder is gone: its lease lapsed, its runner is gone, or it has none."""
    return or_(
        lease_lapsed(at),
        T.runner_id.in_(list(gone_runners)),
        T.runner_id.is_(None),
        ~exists().where(R.id == T.runner_id),
    )
