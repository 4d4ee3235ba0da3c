"""A real runner sends the outcomes of the tasks that ended with the lease into their slots.

A runner of capacity 2 gets four tasks that wait on one gate file. Once the
gate appears the first two end, and the runner's next request carries their
outcomes and leases the other two: the server writes both in one transaction,
so the first two tasks' ``succeeded`` entries and the last two's ``leased``
entries share one instant.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.store import Store
from watchkeeper.store.schema.queue import queue_events

from .. import queue_daemons as daemons
from ..queue_daemons import QUICK, queue_server, server_env

WAIT_S = 60.0
GATED = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.005)\n"


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store) as live:
        yield live


def test_outcomes_and_the_lease_into_their_slots_are_one_transaction(
    server: LiveServer, tmp_path: Path, store: Store
) -> None:
    gate = tmp_path / "gate"
    daemon = daemons.start_runner(
        "e2e",
        tmp_path / "runner",
        tmp_path / "runner.log",
        "--capacity",
        "2",
        *QUICK,
        env=server_env(server),
    )
    try:
        with Client(server.url, server.tokens["admin"]) as client:
            jobs = [
                client.jobs.submit(
                    f"gated {n}",
                    org="o",
                    fleet="e2e",
                    argv=[sys.executable, "-c", GATED, str(gate)],
                )
                for n in range(4)
            ]

            def running() -> int:
                runners = client.runners.topology()["runners"]
                return sum(len(runner["tasks"]) for runner in runners)

            wait_for(lambda: running() == 2, timeout=WAIT_S, what="two tasks running")
            gate.touch()

            def succeeded() -> bool:
                return all(client.jobs.get(str(j["id"]))["status"] == "succeeded" for j in jobs)

            wait_for(succeeded, timeout=WAIT_S, what="every task succeeded")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)

    statement = select(queue_events.c.task_id, queue_events.c.type, queue_events.c.at)
    with store.engine.connect() as conn:
        events = list(conn.execute(statement))
    leased = {row.task_id: row.at for row in events if row.type == "leased"}
    ended = {row.task_id: row.at for row in events if row.type == "succeeded"}
    assert len(leased) == len(ended) == 4
    first = sorted(leased, key=lambda task_id: leased[task_id])[:2]
    later = [task_id for task_id in leased if task_id not in first]
    # Each later task was leased in the transaction that recorded an earlier one's end.
    assert all(leased[task_id] in {ended[f] for f in first} for task_id in later), events
