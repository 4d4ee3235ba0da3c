"""A runner's lease over real HTTP, taken ahead of the middleware chain when ordinary.

An ordinary lease (a reporter's cached token, a valid runner id, an empty body or one
the documented body model accepts) is answered before the chain by the lease's own
route; every other request goes through the chain to the documented route. Either
way each request is answered as the documented route answers it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.support.early_routes import Seen, answered_alike, seen
from tests.support.live_server import LiveServer, live_server
from tests.support.waiting import TIMEOUT_S
from watchkeeper.client import Client
from watchkeeper.runtime import Runtime
from watchkeeper.server.api.lease import LeaseRoute
from watchkeeper.server.api.progress import ProgressRoute
from watchkeeper.server.api.queue import router as queue_router
from watchkeeper.server.api.runs import router as runs_router
from watchkeeper.server.http.auth import reporter as reporter_token_check

_LEASE = "/api/v1/runners/{runner}/lease"
_JSON = "application/json"

Body = bytes | Callable[[dict[str, Any]], bytes] | None


def _outcome(token: str | None = None, **more: Any) -> Callable[[dict[str, Any]], bytes]:
    """A body reporting the outcome of the task leased just before the request."""

    def body(held: dict[str, Any]) -> bytes:
        outcome = {"task_id": held["id"], "lease_token": token or held["lease_token"], **more}
        return json.dumps({"max": 1, "outcomes": [outcome]}).encode()

    return body


# (token role or a literal Authorization header, path, content type, body)
CASES: list[tuple[str | None, str, str | None, Body]] = [
    ("reporter", _LEASE, None, None),
    ("reporter", _LEASE, _JSON, b'{"max": 2}'),
    ("admin", _LEASE, _JSON, b'{"max": 1}'),
    ("reporter", _LEASE, _JSON, b"{}"),
    ("reporter", _LEASE, _JSON, _outcome(exit_code=0)),
    ("reporter", _LEASE, _JSON, _outcome(exit_code=3, reason="boom")),
    ("reporter", _LEASE, _JSON, _outcome(token="forged", exit_code=0)),
    ("reporter", _LEASE, _JSON, b'{"max": 1, "outcomes": []}'),
    ("reporter", _LEASE, _JSON, b'{"max": "2"}'),
    ("reporter", _LEASE, "application/json; charset=utf-8", b'{"max": 1}'),
    ("reporter", _LEASE, _JSON, b"null"),
    # Refused by the body's rules.
    ("reporter", _LEASE, _JSON, b"{"),
    ("reporter", _LEASE, _JSON, b"[]"),
    ("reporter", _LEASE, _JSON, b"[" * 50_000 + b"]" * 50_000),
    ("reporter", _LEASE, _JSON, b'{"max": 0}'),
    ("reporter", _LEASE, _JSON, b'{"max": 101}'),
    ("reporter", _LEASE, _JSON, b'{"max": 1, "extra": true}'),
    ("reporter", _LEASE, _JSON, b'{"max": NaN}'),
    ("reporter", _LEASE, _JSON, _outcome(status="succeeded", exit_code=0)),
    ("reporter", _LEASE, _JSON, _outcome(exit_code=0, reason="\x00")),
    ("reporter", _LEASE, _JSON, _outcome(token="\ud800", exit_code=0)),
    ("reporter", _LEASE, "text/plain", b'{"max": 1}'),
    # Refused by the path, or by what the store holds.
    ("reporter", "/api/v1/runners/R-1/lease", _JSON, b'{"max": 1}'),
    ("reporter", "/api/v1/runners/{runner}%0A/lease", _JSON, b'{"max": 1}'),
    ("reporter", "/api/v1/runners/r-00000000/lease", _JSON, b'{"max": 1}'),
    ("reporter", "/api/v1/runners/{stopped}/lease", _JSON, b'{"max": 1}'),
    # Refused by the token.
    ("viewer", _LEASE, _JSON, b'{"max": 1}'),
    (None, _LEASE, _JSON, b'{"max": 1}'),
    ("Bearer not-a-token", _LEASE, _JSON, b'{"max": 1}'),
    ("Basic dXNlcjpwYXNz", _LEASE, _JSON, b'{"max": 1}'),
    ("task", _LEASE, _JSON, b'{"max": 1}'),
]


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        with Client(live.url, live.tokens["admin"]) as admin:
            for n in range(40):
                admin.jobs.submit(f"job {n}", org="free", fleet="cpu", argv=["true"])
        yield live


def _answers(server: LiveServer) -> list[Seen]:
    """Every case's answer, with what differs from one world to the next (ids, tokens,
    times) left out, from runners of its own."""
    with Client(server.url, server.tokens["reporter"]) as reporter:
        runner = str(reporter.runners.register("cpu", capacity=60, host="h", pid=7)["id"])
        stopped = str(reporter.runners.register("cpu", capacity=1, host="h", pid=8)["id"])
        reporter.runners.stop(stopped)
        held = reporter.runners.lease(runner, max=1)[0]
    answers = []
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as http:
        for role, path, content_type, body in CASES:
            headers = {} if content_type is None else {"Content-Type": content_type}
            if role == "task":
                headers["Authorization"] = f"Bearer {held['task_token']}"
            elif role in server.tokens:
                headers["Authorization"] = f"Bearer {server.tokens[role]}"
            elif role is not None:
                headers["Authorization"] = role
            content = body(held) if callable(body) else body
            url = path.format(runner=runner, stopped=stopped)
            response = http.post(url, content=content, headers=headers)
            answers.append(_seen(response, {runner: "{runner}", stopped: "{stopped}"}))
            if response.status_code == 200 and response.json()["tasks"]:
                held = response.json()["tasks"][0]
    return answers


def _seen(response: httpx.Response, ids: dict[str, str]) -> tuple[int, str | None, str | None, Any]:
    """What a caller relies on: status, the headers that carry meaning, the body's shape
    (the fields of each task and each outcome's verdict) or its error; ids named alike."""
    text = response.text
    for given, name in ids.items():
        text = text.replace(given, name)
    text = re.sub(r"\bt-[0-9a-f]+\b", "{task}", text)
    body = json.loads(text)
    if response.status_code == 200:
        body = {
            "tasks": [sorted(task) for task in body["tasks"]],
            "outcomes": [(o.get("status"), o.get("code")) for o in body.get("outcomes", [])],
        }
    return seen(response, body)


def test_every_lease_request_is_answered_as_the_documented_route_answers_it(
    server: LiveServer,
) -> None:
    documented = answered_alike(server, LeaseRoute, _answers, CASES)
    statuses = [answer[0] for answer in documented]
    assert {200, 401, 403, 404, 409, 422} <= set(statuses)
    # The outcomes were recorded, and the forged one refused alone.
    verdicts = [answer[3]["outcomes"] for answer in documented if answer[0] == 200]
    assert [("succeeded", None)] in verdicts and [("failed", None)] in verdicts
    assert [(None, "lease_lost")] in verdicts


class _Counting:
    """An ASGI app in front of ``app`` that notes the path of every request it sees."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


def test_an_ordinary_lease_never_reaches_the_middleware_chain(server: LiveServer) -> None:
    with Client(server.url, server.tokens["reporter"]) as reporter:
        runner = str(reporter.runners.register("cpu", capacity=4, host="h", pid=7)["id"])
        assert server.server is not None
        stack = server.server.config.app.middleware_stack  # built by the first request
        chain = _Counting(stack.app)
        stack.app = chain
        [held] = reporter.runners.lease(runner, max=1)
        outcome = {"task_id": held["id"], "lease_token": held["lease_token"], "exit_code": 0}
        answer = reporter.runners.report_and_lease(runner, [outcome], max=2)
        assert answer["outcomes"][0]["status"] == "succeeded"
        assert len(answer["tasks"]) == 2
    assert chain.paths == []
    # A request that is not ordinary goes through the chain, and is refused there.
    with server.client("viewer") as viewer:
        refused = viewer.post(f"/api/v1/runners/{runner}/lease", json={"max": 1})
    assert refused.status_code == 403
    assert chain.paths == [f"/api/v1/runners/{runner}/lease"]


def test_the_early_routes_stand_for_documented_routes_checking_only_the_reporter_token(
    server: LiveServer,
) -> None:
    # The early routes check the token and the body themselves: a check added to the
    # documented route (a rate limit, another dependency) must be added there too.
    assert server.server is not None
    routes = server.server.config.app.router.routes
    documented = {
        (route.path, frozenset(route.methods)): route
        for route in [*queue_router.routes, *runs_router.routes]
        if isinstance(route, APIRoute)
    }
    for early, path in (
        (LeaseRoute, "/api/v1/runners/{runner_id}/lease"),
        (ProgressRoute, "/api/v1/runs/{kind}/{run_id}/progress"),
    ):
        [taken] = [route for route in routes if isinstance(route, early)]
        route = documented[(path, frozenset({"POST"}))]
        assert taken.endpoint is route.endpoint
        assert [d.call for d in route.dependant.dependencies] == [reporter_token_check]
        assert [p.name for p in route.dependant.body_params] == ["body"]
