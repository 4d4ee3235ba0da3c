"""A runner row with a time no clock can read is contained; runners long gone are pruned."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from tests.integration.queue.conftest import make_service, runner, submit
from tests.support.live_server import live_server
from watchkeeper.clock import ManualClock
from watchkeeper.queue import reconcile
from watchkeeper.queue.service import QueueService
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.queue import QueueStore
from watchkeeper.store.queue import runners as runner_rows
from watchkeeper.store.queue.runners import RUNNER_RETENTION


@pytest.fixture
def queue(tmp_path: Path, runtime: Runtime, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, runtime.store, clock)


def _spoil(store: Store, runner_id: str, column: str, value: Any) -> None:
    """Write ``value`` straight into the runner's row, as a hand edit or a bad restore would."""
    with store.engine.begin() as conn:
        conn.execute(
            text(f"UPDATE queue_runners SET {column} = :v WHERE id = :id"),
            {"v": value, "id": runner_id},
        )


def _bad_value(store: Store, kind: str) -> Any:
    if kind == "huge":
        return 1e300
    if kind == "infinite":
        return float("inf")
    # A value that is no number at all: NaN on PostgreSQL; SQLite turns NaN into a
    # NULL its NOT NULL refuses, but keeps text in a REAL column.
    return "never" if store.url.startswith("sqlite") else float("nan")


@pytest.mark.parametrize("kind", ["huge", "infinite", "not-a-number"])
@pytest.mark.parametrize("column", ["heartbeat_at", "registered_at"])
def test_one_unreadable_runner_row_spoils_neither_topology_nor_reasons(
    runtime: Runtime,
    queue: QueueService,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    column: str,
) -> None:
    monkeypatch.setattr(runner_rows, "_told", set())
    good = runner(queue, capacity=1)
    odd = runner(queue, capacity=1)
    busy = submit(queue)
    [lease] = queue.lease(good.id)
    assert lease.task.job_id == busy.id
    waiting = submit(queue)
    _spoil(runtime.store, odd.id, column, _bad_value(runtime.store, kind))
    with (
        caplog.at_level(logging.WARNING, logger=runner_rows.__name__),
        live_server(runtime) as server,
        server.client("viewer") as http,
    ):
        for _ in range(2):
            topology = http.get("/api/v1/topology")
            assert topology.status_code == 200, topology.text
            shown = topology.json()
            assert [r["id"] for r in shown["runners"]] == [good.id]
            assert shown["runners"][0]["tasks"][0]["id"] == lease.task.id
            [fleet] = shown["fleets"]
            assert fleet["runners"] == 1 and fleet["queued"] == 1
            listed = http.get("/api/v1/runners")
            assert listed.status_code == 200, listed.text
            assert [r["id"] for r in listed.json()["runners"]] == [good.id]
            job = http.get(f"/api/v1/jobs/{waiting.id}")
            assert job.status_code == 200, job.text
            blocked = job.json()["tasks"][0]["blocked"]
            assert blocked["code"] == "runners_busy", blocked
    told = [r for r in caplog.records if r.name == runner_rows.__name__]
    assert len(told) == 1, [r.getMessage() for r in told]
    assert odd.id in told[0].getMessage() and column in told[0].getMessage()


def test_runners_gone_longer_than_the_retention_are_pruned_when_a_runner_registers(
    store: Store, queue: QueueService, clock: ManualClock
) -> None:
    stopped = runner(queue)
    queue.stop_runner(stopped.id)
    silent = runner(queue)
    holder = runner(queue, fleet="gpu")
    submit(queue, fleet="gpu")
    [held] = queue.lease(holder.id)
    clock.advance(RUNNER_RETENTION.total_seconds() - 1)
    recent = runner(queue)
    everyone = {r.id for r in QueueStore(store.engine).runners(include_stopped=True)}
    assert {stopped.id, silent.id, holder.id, recent.id} <= everyone
    clock.advance(2)
    fresh = runner(queue)
    kept = {r.id for r in QueueStore(store.engine).runners(include_stopped=True)}
    # The holder stays while a task still names it running: recovery takes that
    # lease back first, and the task's timeline keeps naming a runner that exists.
    assert kept == {holder.id, recent.id, fresh.id}
    assert QueueStore(store.engine).task(held.task.id).runner_id == holder.id


def test_start_up_prunes_runners_gone_longer_than_the_retention(
    runtime: Runtime, queue: QueueService, clock: ManualClock
) -> None:
    silent = runner(queue)
    stopped = runner(queue)
    queue.stop_runner(stopped.id)
    rows = QueueStore(runtime.store.engine)
    assert {r.id for r in rows.runners(include_stopped=True)} == {silent.id, stopped.id}
    clock.advance(RUNNER_RETENTION.total_seconds() + 1)
    reconcile.mark_interrupted(runtime.store, clock(), queue.policy)
    assert rows.runners(include_stopped=True) == []
