"""The interrupted marker: set at start-up on tasks of gone runners, cleared when they run again."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.queue.conftest import make_service, runner, submit
from tests.support.live_server import LiveServer, live_server
from tests.support.waiting import TIMEOUT_S
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.queue import reconcile
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Lease
from watchkeeper.runtime import Runtime
from watchkeeper.server.api import events as routes_events
from watchkeeper.server.api.events import broadcaster_of
from watchkeeper.store.queue import QueueStore


@pytest.fixture
def queue(tmp_path: Path, runtime: Runtime, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, runtime.store, clock)


def _running(queue: QueueService, fleet: str = "cpu") -> Lease:
    job = submit(queue, fleet=fleet)
    found = runner(queue, fleet=fleet, capacity=1)
    [lease] = queue.lease(found.id)
    assert lease.task.job_id == job.id
    return lease


#: Past the offline window (30 s): a runner that never heartbeats again is gone.
SILENT_S = 31


def _task(server: LiveServer, task_id: str) -> dict[str, Any]:
    with Client(server.url, server.tokens["viewer"]) as client:
        return client.jobs.task(task_id)


#: Published by the test after its actions; the reader stops when it arrives.
DRAINED = "test.drained"


class _Stream:
    """``GET /api/v1/events`` read in a thread: the events seen so far."""

    def __init__(self, server: LiveServer) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._server = server
        self._subscribed = threading.Event()
        self._drained = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        headers = {"Authorization": f"Bearer {self._server.tokens['viewer']}"}
        with (
            httpx.Client(base_url=self._server.url, headers=headers, timeout=TIMEOUT_S) as http,
            http.stream("GET", "/api/v1/events") as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            event = ""
            for line in response.iter_lines():
                if line == ": subscribed":
                    self._subscribed.set()
                elif line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    if event == DRAINED:
                        self._drained.set()
                        return
                    self.events.append((event, json.loads(line.removeprefix("data: "))))

    def updated(self) -> list[dict[str, Any]]:
        return [data["task"] for event, data in self.events if event == "task.updated"]

    @contextmanager
    def open(self) -> Iterator[_Stream]:
        self._thread.start()
        assert self._subscribed.wait(10), "the event stream did not open"
        try:
            yield self
        finally:
            # A stream delivers in the order published: once the reader sees this marker,
            # every event published before it has been read.
            assert self._server.server is not None
            app = self._server.server.config.app
            broadcaster_of(app).publish(DRAINED, {"type": DRAINED})
            assert self._drained.wait(10), "the stream did not deliver what was published"
            self._thread.join(timeout=5)


def test_only_running_tasks_are_marked_at_start_up(
    runtime: Runtime, queue: QueueService, clock: ManualClock
) -> None:
    running = _running(queue)
    queued = submit(queue, fleet="gpu").tasks[0]
    finished = _running(queue, fleet="arm")
    queue.complete(finished.task.id, finished.token)
    deleted = submit(queue, fleet="gpu")
    queue.cancel(deleted.id)
    queue.delete(deleted.id)
    clock.advance(SILENT_S)
    with live_server(runtime) as server:
        marked = _task(server, running.task.id)
        assert marked["interrupted"] is True and marked["status"] == "running"
        assert marked["interrupted_at"] == "2026-01-05T12:00:31Z"
        for other in (queued.id, finished.task.id):
            shown = _task(server, other)
            assert shown["interrupted"] is False and shown["interrupted_at"] is None
        with Client(server.url, server.tokens["viewer"]) as client:
            [job] = [j for j in client.jobs.list() if j["id"] == running.task.job_id]
        assert job["tasks"][0]["interrupted"] is True
    assert QueueStore(runtime.store.engine).interrupted(
        [running.task.id, queued.id, finished.task.id, deleted.tasks[0].id]
    ) == {running.task.id: "2026-01-05T12:00:31Z"}


def test_the_marker_survives_restarts_until_the_task_runs_again(
    runtime: Runtime, queue: QueueService, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routes_events, "KEEP_ALIVE_S", 0.1)
    marked = _running(queue)
    plain = _running(queue, fleet="gpu")
    clock.advance(SILENT_S)
    with live_server(runtime):
        pass
    clock.advance(5)
    with live_server(runtime):
        pass
    clock.advance(5)
    with live_server(runtime) as server:
        # Marked at the first start, kept (not re-stamped) by the next two.
        assert _task(server, marked.task.id)["interrupted_at"] == "2026-01-05T12:00:31Z"
        with (
            Client(server.url, server.tokens["reporter"]) as reporter,
            _Stream(server).open() as stream,
        ):
            reporter.runners.renew(marked.task.id, marked.token, progressed=True)
            reporter.runners.renew(marked.task.id, marked.token)
            assert _task(server, marked.task.id)["interrupted"] is False
        [update] = stream.updated()
        assert update["id"] == marked.task.id and update["interrupted"] is False
        assert update["interrupted_at"] is None and update["status"] == "running"
    # The other task was marked too, but nobody listened when it was cleared.
    assert QueueStore(runtime.store.engine).interrupted([plain.task.id]) != {}


def test_nothing_is_published_when_no_marker_is_removed(
    runtime: Runtime, queue: QueueService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routes_events, "KEEP_ALIVE_S", 0.1)
    with live_server(runtime) as server:
        lease = _running(queue)  # after start-up: never marked
        submit(queue)
        with (
            Client(server.url, server.tokens["reporter"]) as reporter,
            _Stream(server).open() as stream,
        ):
            reporter.runners.renew(lease.task.id, lease.token, progressed=True)
            other = reporter.runners.register("cpu", capacity=1, host="h", pid=1)
            assert len(reporter.runners.lease(other["id"])) == 1
        assert stream.updated() == []


def test_a_requeued_marked_task_is_cleared_when_leased_again(
    runtime: Runtime, queue: QueueService, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routes_events, "KEEP_ALIVE_S", 0.1)
    lease = _running(queue)
    clock.advance(SILENT_S)
    with live_server(runtime) as server:
        clock.advance(120)  # the runner never came back: its lease lapses
        queue.recover()
        requeued = _task(server, lease.task.id)
        assert requeued["status"] == "queued" and requeued["interrupted"] is True
        with (
            Client(server.url, server.tokens["reporter"]) as reporter,
            _Stream(server).open() as stream,
        ):
            fresh = reporter.runners.register("cpu", capacity=1, host="h", pid=2)
            [again] = reporter.runners.lease(fresh["id"])
            assert again["id"] == lease.task.id
        [update] = stream.updated()
        assert update["id"] == lease.task.id and update["interrupted"] is False
        assert _task(server, lease.task.id)["interrupted"] is False


def test_a_failed_marker_write_is_logged_and_start_up_goes_on(
    runtime: Runtime,
    queue: QueueService,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lease = _running(queue)

    def broken(self: QueueStore, now: datetime, gone_runners: object) -> list[str]:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(QueueStore, "mark_interrupted", broken)
    with (
        caplog.at_level(logging.WARNING, logger=reconcile.__name__),
        live_server(runtime) as server,
    ):
        assert _task(server, lease.task.id)["interrupted"] is False
    [record] = [r for r in caplog.records if r.name == reconcile.__name__]
    assert record.levelno == logging.WARNING and "the disk is full" in record.getMessage()
