"""Progress reports over real HTTP: the route that takes ordinary reports answers every
request exactly as the documented route does, and reports sent together share one
transaction, each answered only once it committed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from tests.support.waiting import TIMEOUT_S
from watchkeeper.runtime import Runtime
from watchkeeper.server.api.progress import ProgressRoute
from watchkeeper.store import Store
from watchkeeper.store.engine import write_transaction
from watchkeeper.store.schema import push_runs

from ..conftest import make_settings
from ..support.early_routes import answered_alike, seen
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for

# (token role or a literal header, path, content type, raw body)
_OK = "/api/v1/runs/crawl/r1/progress"
CASES: list[tuple[str | None, str, str | None, bytes | None]] = [
    ("reporter", _OK, "application/json", b'{"step": "s"}'),
    ("admin", _OK, "application/json", b'{"step": "by an admin"}'),
    ("reporter", _OK, "application/json", b"{}"),
    ("reporter", _OK, None, None),
    ("reporter", _OK, "application/json", b"null"),
    ("reporter", _OK, "application/json", b'{"step": null}'),
    ("reporter", _OK, None, b'{"step": "no content type"}'),
    ("reporter", _OK, "application/json; charset=utf-8", b'{"step": "charset"}'),
    ("reporter", _OK, "text/plain", b'{"step": "plain text"}'),
    ("reporter", _OK, "application/json", b'{"step": "tab\\tand\\nnewline"}'),
    ("reporter", _OK, "application/json", b'{"at": "2020-01-01T00:00:00Z"}'),
    ("reporter", _OK, "application/json", b'{"step": "x", "at": null}'),
    # Refused by the body's rules.
    ("reporter", _OK, "application/json", b"{"),
    ("reporter", _OK, "application/json", b"[]"),
    ("reporter", _OK, "application/json", b"[" * 50_000 + b"]" * 50_000),
    ("reporter", _OK, "application/json", b'"step"'),
    ("reporter", _OK, "application/json", b'{"step": 5}'),
    ("reporter", _OK, "application/json", json.dumps({"step": "x" * 2001}).encode()),
    ("reporter", _OK, "application/json", json.dumps({"step": "x" * 2000}).encode()),
    ("reporter", _OK, "application/json", b'{"step": "a\\u0000b"}'),
    ("reporter", _OK, "application/json", b'{"step": "a\\u0007b"}'),
    ("reporter", _OK, "application/json", b'{"step": "\\ud800"}'),
    ("reporter", _OK, "application/json", b'{"step": "s", "extra": 1}'),
    ("reporter", _OK, "application/json", b'{"at": "2999-01-01T00:00:00Z"}'),
    ("reporter", _OK, "application/json", b'{"at": "2020-01-01T00:00:00"}'),
    ("reporter", _OK, "application/json", b'{"at": "yesterday"}'),
    # Refused by the path, or by what the store holds.
    ("reporter", "/api/v1/runs/nokind/r1/progress", "application/json", b"{}"),
    ("reporter", "/api/v1/runs/Bad%20Kind/r1/progress", "application/json", b"{}"),
    ("reporter", "/api/v1/runs/crawl/-r1/progress", "application/json", b"{}"),
    ("reporter", "/api/v1/runs/crawl/nope/progress", "application/json", b"{}"),
    ("reporter", "/api/v1/runs/crawl%0A/r1/progress", "application/json", b"{}"),
    ("reporter", "/api/v1/runs/crawl/ended/progress", "application/json", b"{}"),
    ("reporter", "/api/v1/runs/{other}/r1/progress", "application/json", b"{}"),
    ("reporter", "/api/v1/runs/process/p1/progress", "application/json", b"{}"),
    # Refused by who asks, whatever else is wrong.
    (None, _OK, "application/json", b'{"step": "s"}'),
    ("Bearer wk_nope", _OK, "application/json", b'{"step": "s"}'),
    ("Basic abc", _OK, "application/json", b'{"step": "s"}'),
    ("Bearer  wk_spaced", _OK, "application/json", b'{"step": "s"}'),
    ("viewer", _OK, "application/json", b'{"step": "s"}'),
    ("viewer", _OK, "application/json", b'{"step": 5}'),
    (None, _OK, "application/json", b"{"),
    (None, "/api/v1/runs/crawl/-r1/progress", "application/json", b"{}"),
]


@pytest.fixture
def api(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    runtime = Runtime.open(make_settings(tmp_path, store.url), store=store)
    with live_server(runtime) as server:
        with server.client("reporter") as http:
            for run_id in ("r1", "ended"):
                started = http.post(
                    "/api/v1/runs", json={"kind": "crawl", "run_id": run_id, "title": "t"}
                )
                assert started.status_code == 201, started.text
            assert http.post("/api/v1/runs/crawl/ended/finish", json={}).status_code == 200
        yield server
    runtime.sweeper.close()


def _answers(server: LiveServer) -> list[tuple[Any, ...]]:
    other = sorted(server.runtime.push_kinds - {"crawl"})[0]
    answers = []
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as http:
        for who, path, content_type, body in CASES:
            headers = {}
            if who is not None:
                headers["Authorization"] = (
                    f"Bearer {server.tokens[who]}" if who in server.tokens else who
                )
            if content_type is not None:
                headers["Content-Type"] = content_type
            response = http.post(path.format(other=other), content=body, headers=headers)
            answers.append(_shown(response))
    return answers


def _shown(response: httpx.Response) -> tuple[Any, ...]:
    """What a caller relies on: status, the headers that carry meaning, the body without the
    times and versions a later report changes."""
    body = response.json()
    if "error" in body:
        body["error"]["message"] = re.sub(r"server time [^)]*", "", body["error"]["message"])
    if response.status_code == 200:
        for moving in ("state_token", "progress_at", "last_seen_at", "started_at"):
            assert body.pop(moving)
        # When the work last said where it is: a report of any step moves it.
        body.pop("reported_at", None)
    return seen(response, body)


def test_every_progress_request_is_answered_as_the_documented_route_answers_it(
    api: LiveServer,
) -> None:
    documented = answered_alike(api, ProgressRoute, _answers, CASES)
    statuses = {answer[0] for answer in documented}
    assert {200, 400, 401, 403, 404, 409, 422} <= statuses


def test_reports_sent_together_share_one_transaction_each_answered_after_it(
    api: LiveServer,
) -> None:
    runs = api.runtime.store.runs
    before = runs.get("crawl", "r1").version
    senders = 6
    with (
        api.client("reporter") as http,
        ThreadPoolExecutor(senders) as pool,
    ):
        # Hold the write: the first report leads and waits; the others queue behind it.
        with write_transaction(api.runtime.store.engine) as held:
            held.execute(select(push_runs.c.run_id).with_for_update())
            answers: list[Future[httpx.Response]] = [
                pool.submit(http.post, _OK, json={"step": f"step {n}"}) for n in range(senders)
            ]
            wait_for(
                lambda: len(runs._moves._pending) == senders - 1,
                timeout=20,
                what="the reports did not queue behind the held write",
            )
            assert not any(answer.done() for answer in answers)
        responses = [answer.result(timeout=30) for answer in answers]
    assert all(response.status_code == 200 for response in responses), responses
    tokens = sorted(response.json()["state_token"] for response in responses)
    assert tokens == sorted(f"a1v{before + n}" for n in range(1, senders + 1))
    assert runs.get("crawl", "r1").version == before + senders
    # The leader went alone; the five that queued behind it were recorded together.
    assert (senders - 1, senders - 1) in runs._moves.recent
