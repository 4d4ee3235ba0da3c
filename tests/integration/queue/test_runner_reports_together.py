"""A real runner whose tasks end in the same pass reports their outcomes in one request.

Four tasks wait on one gate file; once it appears they all exit within a few
milliseconds, and the runner's next pass finds them ended together: the
server sees one request carrying several outcomes (with the runner's next
lease), records each once, and all of that request's at one instant.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.store import Store
from watchkeeper.store.schema.queue import queue_events

from .. import queue_daemons as daemons
from ..queue_daemons import QUICK, queue_server, server_env

TASKS = 4
WAIT_S = 60.0
GATED = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.005)\n"


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store) as live:
        yield live


def test_tasks_ending_together_are_reported_in_one_request_and_recorded_once(
    server: LiveServer, tmp_path: Path, store: Store
) -> None:
    gate = tmp_path / "gate"
    daemon = daemons.start_runner(
        "e2e",
        tmp_path / "runner",
        tmp_path / "runner.log",
        "--capacity",
        str(TASKS),
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
                for n in range(TASKS)
            ]

            def running() -> int:
                runners = client.runners.topology()["runners"]
                return sum(len(runner["tasks"]) for runner in runners)

            wait_for(lambda: running() == TASKS, timeout=WAIT_S, what="every task running")
            gate.touch()

            def succeeded() -> bool:
                return all(client.jobs.get(str(j["id"]))["status"] == "succeeded" for j in jobs)

            wait_for(succeeded, timeout=WAIT_S, what="every task succeeded")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)

    statement = (
        select(queue_events.c.task_id, func.count(), func.min(queue_events.c.at))
        .where(queue_events.c.type == "succeeded")
        .group_by(queue_events.c.task_id)
    )
    with store.engine.connect() as conn:
        rows = list(conn.execute(statement))
    assert [int(row[1]) for row in rows] == [1] * TASKS
    # Outcomes sent in one request are written in one transaction, at one instant; the
    # daemon sends them with its next lease, so no group of requests is needed for it.
    assert len({row[2] for row in rows}) < TASKS, rows
