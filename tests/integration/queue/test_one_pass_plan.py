"""PostgreSQL: the one-statement pass reads the queue off its index, never the whole table.

Its locking read must walk the lease index in order and stop at the runner's
free slots (no sort of the fleet's queued rows before the ``LIMIT``), and no
part of it may scan all of ``queue_tasks``: the outcomes and the claim find
their rows by key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import make_settings
from tests.integration.queue.test_lease_plan import INDEX, _nodes, filled
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewRunner
from watchkeeper.store import Store
from watchkeeper.store.queue.onepass import END_AND_LEASE_SQL

__all__ = ["filled"]


def _plan(store: Store, params: dict[str, Any]) -> dict[str, Any]:
    with store.engine.begin() as conn:
        found = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {END_AND_LEASE_SQL}", params).scalar()
    plan: dict[str, Any] = (found if isinstance(found, list) else json.loads(str(found)))[0]["Plan"]
    return plan


def _below(node: dict[str, Any], kind: str) -> Iterator[dict[str, Any]]:
    for found in _nodes(node):
        if found["Node Type"] == kind:
            yield found


def test_the_pass_locks_off_the_index_and_never_scans_the_queue(
    filled: Store, tmp_path: Path
) -> None:
    queue = QueueService(filled, make_settings(tmp_path, filled.url))
    held = queue.register(NewRunner("cpu", 10, "host", 1))
    ends = queue.lease(held.id, limit=10)
    params = {
        "ids": [x.task.id for x in ends],
        "tokens": [x.token for x in ends],
        "statuses": ["succeeded"] * len(ends),
        "exits": [0] * len(ends),
        "reasons": [None] * len(ends),
        "fingerprints": [None] * len(ends),
        "at": 1.0,
        "month": "2026-01",
        "runner": held.id,
        "limit": 10,
        "slots": 16,
        "beat_before": 1.0,
    }
    plan = _plan(filled, params)
    shown = json.dumps(plan, indent=1)
    [locking] = list(_below(plan, "LockRows"))
    under = list(_nodes(locking))
    assert not [n for n in under if "Sort" in n["Node Type"]], shown
    assert [n.get("Index Name") for n in under if "Scan" in n["Node Type"]] == [INDEX], shown
    seq = [n for n in _below(plan, "Seq Scan") if n.get("Relation Name") == "queue_tasks"]
    assert seq == [], shown
