"""Timeline events are append-only in the database itself, not only in the API.

A direct ``UPDATE`` or ``DELETE`` of an event, by any connection to the store (a script, a
console, a compromised process with the database's password), is refused by the
database; new events still go in, and deleting a job keeps its events.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.integration.queue.conftest import submit
from watchkeeper.queue.service import QueueService
from watchkeeper.records.timeline import NewEvent
from watchkeeper.store import Store
from watchkeeper.timeline.service import TimelineService


def _events(store: Store) -> list[tuple[object, ...]]:
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT id, phase, job_id FROM timeline_events ORDER BY id"))
        return [tuple(row) for row in rows]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE timeline_events SET name = 'edited'",
        "UPDATE timeline_events SET cost = 0 WHERE id = 1",
        "DELETE FROM timeline_events",
        "DELETE FROM timeline_events WHERE id = 1",
    ],
)
def test_a_direct_edit_or_delete_of_an_event_is_refused(
    store: Store, timeline: TimelineService, queue: QueueService, statement: str
) -> None:
    job = submit(queue)
    timeline.ingest([NewEvent("implementer", job_id=job.id), NewEvent("verify")], "t")
    before = _events(store)
    assert len(before) == 2
    with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as conn:
        conn.execute(text(statement))
    assert _events(store) == before
    timeline.ingest([NewEvent("review", job_id=job.id)], "t")  # appending still works
    assert len(_events(store)) == 3
    queue.delete(job.id)
    assert [row[2] for row in _events(store)].count(job.id) == 2  # the job's events remain
