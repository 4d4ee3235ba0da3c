"""Progress reports taken ahead of the middleware chain, over real HTTP.

An ordinary report with a small declared body is answered before the middleware
chain; every other request to the path goes through the chain as it came (a
chunked body, a large one, one that never arrives whole), so each is answered as
the documented route answers it. Reports wait for their write on threads of the
route's own, as many at once as it allows and the rest queued, each answered after
the commit holding it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from watchkeeper.runtime import Runtime
from watchkeeper.server.api.progress import ProgressRoute
from watchkeeper.server.early import asgi as early
from watchkeeper.server.early.asgi import EARLY_BODY_MAX
from watchkeeper.server.http.limits import MAX_BODY_BYTES
from watchkeeper.store import Store

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for
from .test_slow_clients import _connect, _request

_OK = "/api/v1/runs/crawl/r1/progress"


@pytest.fixture
def api(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    runtime = Runtime.open(make_settings(tmp_path, store.url), store=store)
    with live_server(runtime) as server:
        with server.client("reporter") as http:
            started = http.post(
                "/api/v1/runs", json={"kind": "crawl", "run_id": "r1", "title": "t"}
            )
            assert started.status_code == 201, started.text
        yield server
    runtime.sweeper.close()


def _chunked(body: bytes) -> Iterator[bytes]:
    yield body[:5]
    yield body[5:]


def _padded(size: int) -> bytes:
    """An ordinary report (a plain step) whose body is ``size`` bytes long."""
    return b'{"step": "padded"' + b" " * (size - 18) + b"}"


# (content type, body: bytes, or a function giving the chunks of a body sent chunked)
CASES: list[tuple[str | None, Any]] = [
    ("application/json", b'{"step": "small"}'),
    ("application/json", _padded(EARLY_BODY_MAX)),
    ("application/json", _padded(EARLY_BODY_MAX + 1)),
    ("application/json", _padded(MAX_BODY_BYTES + 1)),
    ("application/json", lambda: _chunked(b'{"step": "chunked"}')),
    ("application/json", lambda: _chunked(_padded(MAX_BODY_BYTES + 1))),
    ("application/json", lambda: _chunked(b'{"step": 5}')),
    ("application/json", b""),
    (None, b""),
]


def _answers(server: LiveServer) -> list[tuple[int, str | None, Any]]:
    answers = []
    with server.client("reporter") as http:
        for content_type, body in CASES:
            headers = {} if content_type is None else {"Content-Type": content_type}
            content = body() if callable(body) else body
            response = http.post(_OK, content=content, headers=headers)
            shown = response.json()
            if response.status_code == 200:
                for moving in ("state_token", "progress_at", "last_seen_at", "started_at"):
                    assert shown.pop(moving)
                # When the work last said where it is: a report of any step moves it.
                shown.pop("reported_at", None)
            answers.append((response.status_code, response.headers.get("content-type"), shown))
    return answers


def test_reports_the_chain_must_read_are_answered_as_the_documented_route_answers_them(
    api: LiveServer,
) -> None:
    assert api.server is not None
    app = api.server.config.app
    assert isinstance(app, FastAPI)
    routes = app.router.routes
    assert isinstance(routes[0], ProgressRoute)
    taken_ahead = _answers(api)
    routes.remove(routes[0])
    documented = _answers(api)
    for case, ours, reference in zip(CASES, taken_ahead, documented, strict=True):
        assert ours == reference, case[0]
    assert [answer[0] for answer in documented] == [200, 200, 200, 413, 200, 413, 422, 200, 200]


def test_a_report_whose_client_leaves_mid_body_records_nothing_and_fails_nothing(
    api: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    assert api.server is not None
    state = api.server.server_state
    head = _request(
        _OK,
        method="POST",
        Authorization=f"Bearer {api.tokens['reporter']}",
        Content_Type="application/json",
        Content_Length="100",
    )
    before = api.runtime.store.runs.get("crawl", "r1").version
    with _connect(api) as sock:
        sock.sendall(head + b'{"step": "cut sh')
        wait_for(lambda: state.tasks, what="the request to be served")
    # Then the client died: its request ends, as the documented route ends it.
    wait_for(lambda: not state.tasks, what="the request of the client that left to end")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.records
    assert api.runtime.store.runs.get("crawl", "r1").version == before
    with api.client("reporter") as http:
        assert http.post(_OK, json={"step": "after"}).status_code == 200


def test_more_reports_at_once_than_writing_threads_are_each_recorded_once(
    api: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fewer threads than reports: the rest wait their turn in the queue.
    monkeypatch.setattr(early.HOP, "most", 2)
    senders = 12
    before = api.runtime.store.runs.get("crawl", "r1").version

    def report(n: int) -> httpx.Response:
        with api.client("reporter") as http:
            return http.post(
                _OK,
                content=json.dumps({"step": f"step {n}"}),
                headers={"Content-Type": "application/json"},
            )

    with ThreadPoolExecutor(senders) as pool:
        responses = list(pool.map(report, range(senders)))

    assert [response.status_code for response in responses] == [200] * senders
    tokens = sorted(response.json()["state_token"] for response in responses)
    assert tokens == sorted(f"a1v{before + n}" for n in range(1, senders + 1))
    steps = {response.json()["step"] for response in responses}
    assert steps == {f"step {n}" for n in range(senders)}
    assert api.runtime.store.runs.get("crawl", "r1").version == before + senders
