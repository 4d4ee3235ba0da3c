"""``TRUNCATE`` cannot empty the append-only timeline either (PostgreSQL).

Row triggers refuse ``UPDATE`` and ``DELETE`` of an event, but a ``TRUNCATE``
fires no row trigger: one statement used to empty the table. SQLite has no
``TRUNCATE``; its ``DELETE`` without ``WHERE`` is refused by the row trigger
(``test_append_only.py``).

The test suite's own reset between PostgreSQL tests still empties the table
and restarts ids, as a superuser holding triggers back on purpose.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.conftest import truncate_all
from tests.integration.queue.conftest import submit
from watchkeeper.queue.service import QueueService
from watchkeeper.records.timeline import NewEvent
from watchkeeper.store import Store
from watchkeeper.timeline.service import TimelineService


def _event_ids(store: Store) -> list[int]:
    with store.engine.connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT id FROM timeline_events ORDER BY id"))]


@pytest.fixture
def on_postgresql(store: Store) -> Store:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no TRUNCATE; its DELETE is refused by the row trigger")
    return store


@pytest.mark.parametrize(
    "statement",
    [
        "TRUNCATE timeline_events",
        "TRUNCATE TABLE timeline_events RESTART IDENTITY",
        "TRUNCATE queue_jobs, timeline_events CASCADE",
        "TRUNCATE ONLY timeline_events",
    ],
)
def test_truncate_of_the_timeline_is_refused_and_changes_nothing(
    on_postgresql: Store, timeline: TimelineService, queue: QueueService, statement: str
) -> None:
    job = submit(queue)
    timeline.ingest([NewEvent("implementer", job_id=job.id), NewEvent("verify")], "t")
    before = _event_ids(on_postgresql)
    assert len(before) == 2
    with (
        pytest.raises(DBAPIError, match=r"append-only.*\(TRUNCATE refused\)"),
        on_postgresql.engine.begin() as conn,
    ):
        conn.execute(text(statement))
    assert _event_ids(on_postgresql) == before
    assert [found.id for found in queue.jobs()] == [job.id]  # the whole statement was refused
    timeline.ingest([NewEvent("review", job_id=job.id)], "t")  # appending still works
    assert len(_event_ids(on_postgresql)) == 3


def test_the_test_suites_reset_still_empties_the_timeline_and_restarts_ids(
    on_postgresql: Store, timeline: TimelineService, queue: QueueService
) -> None:
    job = submit(queue)
    timeline.ingest([NewEvent("implementer", job_id=job.id), NewEvent("verify")], "t")
    assert len(_event_ids(on_postgresql)) == 2
    truncate_all(on_postgresql.url)
    assert _event_ids(on_postgresql) == []
    assert queue.jobs() == []
    timeline.ingest([NewEvent("verify")], "t")
    assert _event_ids(on_postgresql) == [1]  # ids begin again, as tests expect
