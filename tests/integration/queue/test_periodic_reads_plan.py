"""PostgreSQL: what the server reads about tasks on every tick stays off the finished ones.

A queue keeps its finished tasks, so ``queue_tasks`` grows without end while the
unfinished part stays small. On PostgreSQL the status, runner and finish indexes
are partial (``store/schema/queue.py``); every periodic read must still be
answered from one of them, never by a scan of the whole table. The check runs
the real reads over a store of thousands of finished tasks, records each
statement with its parameters as sent, and explains it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from tests.conftest import T0, make_settings, truncate_all
from tests.integration.queue.test_lease_plan import _nodes
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewJob, NewRunner
from watchkeeper.store import Store
from watchkeeper.store.queue.judging import JudgingReads

FINISHED = 4000


@pytest.fixture
def aged(pg_schema_url: str, tmp_path: Path) -> Iterator[QueueService]:
    """A queue with thousands of finished tasks, a few running and a few queued."""
    truncate_all(pg_schema_url)
    store = Store(pg_schema_url)
    # The suite's reset deletes rows; the plans compared here need the tables as new (no dead
    # rows or index entries left by earlier tests, which a VACUUM cannot always remove while
    # another worker's transaction is open), as a TRUNCATE leaves them.
    with store.engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE queue_tasks, queue_jobs CASCADE")
    queue = QueueService(store, make_settings(tmp_path, pg_schema_url))
    news = [NewJob("noop", "acme", "cpu", {"argv": ["true"]}, "test")] * (FINISHED + 20)
    queue.store.submit_many(news, T0)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE queue_tasks SET status = 'succeeded', finished_at = %(at)s"
            " WHERE id IN (SELECT id FROM queue_tasks ORDER BY id LIMIT %(n)s)",
            {"at": (T0 - timedelta(days=3)).timestamp(), "n": FINISHED},
        )
    held = queue.register(NewRunner("cpu", 5, "host", 1))
    queue.lease(held.id, limit=5)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE queue_tasks")
    yield queue
    store.close()


@pytest.fixture
def sent(aged: QueueService) -> Iterator[list[tuple[str, Any]]]:
    """Every statement the store sends, with its parameters."""
    seen: list[tuple[str, Any]] = []

    def note(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    event.listen(aged.store._engine, "before_cursor_execute", note)
    yield seen
    event.remove(aged.store._engine, "before_cursor_execute", note)


def _scans_the_table(queue: QueueService, statement: str, params: Any) -> list[str]:
    with queue.store._engine.connect() as conn:
        found = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", params).scalar()
        conn.rollback()
    plan = (found if isinstance(found, list) else json.loads(str(found)))[0]["Plan"]
    return [
        json.dumps(plan, indent=1)
        for node in _nodes(plan)
        if node["Node Type"] == "Seq Scan" and node.get("Relation Name") == "queue_tasks"
    ]


def test_periodic_reads_never_scan_every_task(
    aged: QueueService, sent: list[tuple[str, Any]]
) -> None:
    now = aged.clock()
    JudgingReads(aged.store._engine).for_judging_split(now - timedelta(days=1))
    aged.blocked()
    aged.recover(now)
    aged.store.mark_interrupted(now, ["r-0"])
    reads = [(s, p) for s, p in sent if "queue_tasks" in s and not s.startswith("EXPLAIN")]
    assert len(reads) >= 4
    for statement, params in reads:
        assert _scans_the_table(aged, statement, params) == [], statement
