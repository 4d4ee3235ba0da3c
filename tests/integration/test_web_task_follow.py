"""The stream a task's page follows its output through, on both databases: what the kept
output gained, redacted; resumed from an event id; replaced when another run takes the
task up; ended with the task's status, or ``gone`` once it was deleted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.integration.queue.conftest import make_service, runner, submit
from tests.support.live_server import LiveServer, live_server
from tests.support.web_login import log_in
from watchkeeper.clock import ManualClock
from watchkeeper.queue.output import Piece, ship
from watchkeeper.queue.service import QueueService
from watchkeeper.runtime import Runtime

Event = tuple[str, str, str]  # name, data, id


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


@pytest.fixture
def queue(tmp_path: Path, runtime: Runtime, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, runtime.store, clock)


@contextmanager
def _web(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=20) as web:
        log_in(web, server.tokens["viewer"])
        yield web


def _follow(web: httpx.Client, url: str, last_id: str | None = None, most: int = 1) -> list[Event]:
    """The stream's first ``most`` events (fewer if it ends first)."""
    headers = {"Accept": "text/event-stream"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    found: list[Event] = []
    name, data, ident = "", [], ""
    with web.stream("GET", url, headers=headers) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line == "":
                if data:
                    found.append((name, "\n".join(data), ident))
                    if len(found) == most or name == "end":
                        return found
                name, data = "", []
            elif line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data.append(line.removeprefix("data: "))
            elif line.startswith("id: "):
                ident = line.removeprefix("id: ")
    return found


def _ship(queue: QueueService, clock: ManualClock, lease: tuple[str, str], piece: Piece) -> None:
    assert ship(queue.store, lease[0], lease[1], piece, clock()) is not None


def test_the_output_stream_resumes_replaces_redacts_and_ends(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    job = submit(queue)
    worker = runner(queue)
    (first,) = queue.lease(worker.id, 1)
    task_id, lease = first.task.id, (first.task.id, first.token)
    _ship(queue, clock, lease, Piece(0, 2, "a\n", run_id="r-1"))
    url = f"/web/tasks/{task_id}/follow"
    with _web(server) as web:
        # Drawn before any output arrived: the run's output arrives whole.
        assert _follow(web, f"{url}?at=0") == [("reset", "a\n", "2:r-1")]
        _ship(queue, clock, lease, Piece(2, 4, "b\n", run_id="r-1"))
        # Resumed from the last event's id (which wins over the query): only what is new.
        assert _follow(web, f"{url}?at=0", last_id="2:r-1") == [("output", "b\n", "4:r-1")]

        # Another run takes the task up: its output replaces the last one's, redacted again.
        queue.fail(task_id, first.token, "stopped by the test")
        queue.retry(job.id)
        (second,) = queue.lease(worker.id, 1)
        kept = "c\nAPI_TOKEN=hunter2-not-for-pages\n"
        _ship(queue, clock, (task_id, second.token), Piece(0, 40, kept, run_id="r-2"))
        (event,) = _follow(web, url, last_id="4:r-1")
        assert event[0] == "reset" and event[1].startswith("c\nAPI_TOKEN=")
        assert "hunter2" not in event[1] and "[redacted]" in event[1]
        # The id counts the kept text, not the text as redacted again on its way out.
        assert event[2] == f"{len(kept.encode())}:r-2"

        queue.complete(task_id, second.token, 0)
        # An id this stream never sent is ignored; the query says where the page got to.
        at = event[2].split(":")[0]
        assert _follow(web, f"{url}?at={at}&run=r-2", last_id="x:" + "y" * 200) == [
            ("end", "succeeded", "")
        ]

        queue.delete(job.id)
        assert _follow(web, url, last_id=event[2]) == [("end", "gone", "")]


def test_an_unknown_task_ends_its_stream_at_once_and_a_malformed_id_is_refused(
    server: LiveServer,
) -> None:
    with _web(server) as web:
        assert _follow(web, "/web/tasks/t-0123abcd/follow") == [("end", "gone", "")]
        assert web.get("/web/tasks/not-a-task/follow").status_code == 422
