"""PostgreSQL: the lease reads its page of candidates straight off an index, with no sort.

A lease reads the fleet's queued tasks oldest first, ``queued_at`` then
``id``, a page at a time. An index whose key matches that filter and order
lets PostgreSQL stop after one page; one that does not makes it sort every
queued row of the fleet before the ``LIMIT``. The check reads the plan, not
a clock: the statements are the very ones the lease path builds, compiled
for PostgreSQL, and explained over a queue filled and analyzed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection

from tests.conftest import T0, make_settings, truncate_all
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewJob
from watchkeeper.store import Store
from watchkeeper.store.queue.statements import candidates_statement

QUEUED = 5000
INDEX = "ix_queue_tasks_status_fleet_queued_at_id"


@pytest.fixture
def filled(pg_schema_url: str, tmp_path: Path) -> Iterator[Store]:
    """A PostgreSQL store with thousands of queued tasks over two fleets and two orgs."""
    truncate_all(pg_schema_url)
    store = Store(pg_schema_url)
    queue = QueueService(store, make_settings(tmp_path, pg_schema_url))
    news = [
        NewJob(
            "noop", ("acme", "beta")[i % 2], ("cpu", "gpu")[i % 5 == 0], {"argv": ["true"]}, "test"
        )
        for i in range(QUEUED)
    ]
    # Several submissions, so queued_at takes a few values and id decides within each.
    for start in range(0, QUEUED, 1000):
        queue.store.submit_many(news[start : start + 1000], T0 + timedelta(seconds=start))
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE queue_tasks")
    yield store
    store.close()


def _plan(conn: Connection, statement: Any, values: dict[str, Any]) -> dict[str, Any]:
    compiled = statement.compile(dialect=conn.dialect)
    params = compiled.construct_params(values)
    rows = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {compiled.string}", params).scalar()
    plan: dict[str, Any] = (rows if isinstance(rows, list) else json.loads(rows))[0]["Plan"]
    return plan


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("tied_to_org", [False, True], ids=["fleet", "org-runner"])
@pytest.mark.parametrize("after", [False, True], ids=["first-page", "next-page"])
def test_the_lease_page_is_read_in_index_order_without_a_sort(
    filled: Store, tied_to_org: bool, after: bool
) -> None:
    values: dict[str, Any] = {"p_fleet": "cpu", "p_org": "acme", "p_page": 256}
    if after:
        values.update(p_after_at=T0.timestamp(), p_after_id="")
    with filled.engine.connect() as conn:
        plan = _plan(conn, candidates_statement(tied_to_org, after), values)
    nodes = list(_nodes(plan))
    kinds = [node["Node Type"] for node in nodes]
    assert not [kind for kind in kinds if "Sort" in kind], json.dumps(plan, indent=1)
    scans = [node for node in nodes if node["Node Type"] in ("Index Scan", "Index Only Scan")]
    assert [scan["Index Name"] for scan in scans] == [INDEX], json.dumps(plan, indent=1)
