"""PostgreSQL: the first read of a lease no capped org is in locks as it reads, off the index.

That read (``FOR UPDATE SKIP LOCKED``, as many rows as the lease wants) must
still walk the queue's index in order and stop after its rows: no sort of
every queued row of the fleet before the ``LIMIT``, and the lock taken on the
rows the limit keeps.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.queue.test_lease_plan import INDEX, _nodes, _plan, filled
from watchkeeper.store import Store
from watchkeeper.store.queue.statements import locked_candidates_statement

__all__ = ["filled"]


@pytest.mark.parametrize("tied_to_org", [False, True], ids=["fleet", "org-runner"])
def test_the_locking_first_read_walks_the_index_and_locks_below_the_limit(
    filled: Store, tied_to_org: bool
) -> None:
    values: dict[str, Any] = {"p_fleet": "cpu", "p_org": "acme", "p_page": 10}
    with filled.engine.connect() as conn:
        plan = _plan(conn, locked_candidates_statement(tied_to_org), values)
    nodes = list(_nodes(plan))
    kinds = [node["Node Type"] for node in nodes]
    assert not [kind for kind in kinds if "Sort" in kind], json.dumps(plan, indent=1)
    assert kinds[:2] == ["Limit", "LockRows"], json.dumps(plan, indent=1)
    scans = [node for node in nodes if node["Node Type"] in ("Index Scan", "Index Only Scan")]
    assert [scan["Index Name"] for scan in scans] == [INDEX], json.dumps(plan, indent=1)
