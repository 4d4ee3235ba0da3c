"""The report routes over real HTTP: who may report, that each report moves a run once, and
that the routes are matched first without changing what any path reaches or the OpenAPI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import BaseRoute, Match

from watchkeeper.access.tokens import TokenService
from watchkeeper.redact import redact
from watchkeeper.runtime import Runtime
from watchkeeper.server import app as app_module
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role
from watchkeeper.watch import reports as reports_module

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for

REPORTS = (
    ("/api/v1/runs/crawl/r1/progress", {"step": "s"}),
    ("/api/v1/runs/crawl/r1/heartbeat", None),
    ("/api/v1/runs/crawl/r1/waiting", {"reason": "a person"}),
    ("/api/v1/runs/crawl/r1/finish", {}),
    ("/api/v1/runs/crawl/r1/fail", {"reason": "broke"}),
)


@pytest.fixture
def api(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    runtime = Runtime.open(make_settings(tmp_path, store.url), store=store)
    with live_server(runtime) as server:
        with server.client("reporter") as http:
            assert http.post("/api/v1/runs", json={"kind": "crawl", "run_id": "r1", "title": "t"})
        yield server
    runtime.sweeper.close()


def version(server: LiveServer) -> tuple[str, int]:
    run = server.runtime.store.runs.get("crawl", "r1")
    return run.status.value, run.version


def test_report_routes_refuse_missing_forged_and_weaker_tokens(api: LiveServer) -> None:
    before = version(api)
    with api.client(None) as anonymous, api.client("viewer") as viewer:
        for path, body in REPORTS:
            missing = anonymous.post(path, json=body)
            assert missing.status_code == 401, (path, missing.text)
            assert missing.headers["www-authenticate"] == "Bearer"
            forged = anonymous.post(path, json=body, headers={"Authorization": "Bearer wk_nope"})
            assert forged.status_code == 401, (path, forged.text)
            assert forged.json()["error"]["message"] == "unknown or revoked token"
            # Asked twice: the second answer comes from the token cache and must agree.
            for _ in range(2):
                weak = viewer.post(path, json=body)
                assert weak.status_code == 403, (path, weak.text)
                assert "reporter role" in weak.json()["error"]["message"]
    assert version(api) == before


def test_a_revoked_token_is_refused_at_once_even_after_it_was_cached(api: LiveServer) -> None:
    with api.client("admin") as admin:
        created = admin.post("/api/v1/tokens", json={"role": "reporter", "name": "short"})
        assert created.status_code == 201
        token_id, secret = created.json()["id"], created.json()["token"]
        with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {secret}"}) as rep:
            assert rep.post("/api/v1/runs/crawl/r1/progress", json={}).status_code == 200
            assert admin.post(f"/api/v1/tokens/{token_id}/revoke").status_code == 200
            before = version(api)
            refused = rep.post("/api/v1/runs/crawl/r1/progress", json={})
            assert refused.status_code == 401, refused.text
            assert version(api) == before


def test_a_token_revoked_elsewhere_stops_working_once_the_cache_lapses(api: LiveServer) -> None:
    # The same token service with a half-second cache instead of five: the lapse, not its
    # length, is what is tested, and the test need not sit out the served five seconds.
    api.runtime.tokens = TokenService(api.runtime.store, api.runtime.clock, cache_s=0.5)
    info, secret = api.runtime.store.tokens.create(Role.REPORTER, "elsewhere", api.runtime.clock())
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {secret}"}) as rep:
        assert rep.post("/api/v1/runs/crawl/r1/progress", json={}).status_code == 200
        # Revoked in the store directly, as another replica would: this one's cache is not told.
        api.runtime.store.tokens.revoke(info.id, api.runtime.clock())
        wait_for(
            lambda: rep.post("/api/v1/runs/crawl/r1/heartbeat").status_code == 401,
            timeout=15,
            what="the revoked token still works",
        )


def test_each_progress_report_moves_the_run_exactly_once(api: LiveServer) -> None:
    _, start = version(api)
    with api.client("reporter") as http, api.client("admin") as admin:
        for n in range(25):
            who = http if n % 2 else admin
            answer = who.post("/api/v1/runs/crawl/r1/progress", json={"step": f"step {n}"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["state_token"] == f"a1v{start + n + 1}"
    run = api.runtime.store.runs.get("crawl", "r1")
    assert (run.version, run.step) == (start + 25, "step 24")


def test_progress_wakes_the_sweep_loop_for_the_runs_deadline(tmp_path: Path, store: Store) -> None:
    runtime = Runtime.open(make_settings(tmp_path, store.url), store=store)
    with live_server(runtime, run_sweeper=True) as server, server.client("reporter") as http:
        body = {"kind": "crawl", "run_id": "w1", "title": "t", "budget_s": 3600, "lease_s": 3600}
        assert http.post("/api/v1/runs", json=body).status_code == 201
        wait_for(lambda: runtime.sweeper._wake_at is not None, timeout=10, what="no wake")
        runtime.sweeper._wake_at = None
        assert http.post("/api/v1/runs/crawl/w1/progress", json={}).status_code == 200
        wait_for(
            lambda: runtime.sweeper._wake_at is not None,
            timeout=10,
            what="a progress report did not wake the sweep loop",
        )
    runtime.sweeper.close()


def _sample(route: Any) -> str:
    path: str = route.path
    for name, convertor in route.param_convertors.items():
        value = {"int": 1, "float": 1.5, "path": "a/b"}.get(type(convertor).__name__[:-9].lower())
        path = path.replace(f"{{{name}:path}}", "a/b").replace(f"{{{name}}}", str(value or "x"))
        path = path.replace(f"{{{name}:int}}", "1")
    return path


def _first_match(routes: list[BaseRoute], path: str, method: str) -> Any:
    scope = {"type": "http", "path": path, "method": method, "root_path": "", "headers": []}
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            # An included router (FastAPI resolves its routes lazily): look inside it.
            inner = getattr(route, "original_router", None)
            return (
                child.get("endpoint") if inner is None else _first_match(inner.routes, path, method)
            )
    return None


def _flat(router_routes: list[Any]) -> list[Any]:
    return [r for r in router_routes if hasattr(r, "param_convertors") and hasattr(r, "methods")]


def test_report_routes_are_matched_first_and_every_path_reaches_what_it_did(
    tmp_path: Path, store: Store
) -> None:
    runtime = Runtime.open(make_settings(tmp_path, store.url), store=store)
    app = app_module.create_app(runtime, run_sweeper=False)
    routes = app.router.routes
    progress_path = "/api/v1/runs/crawl/x/progress"
    # Only the process routes (one of which lives under /api/v1/runs) come before the reports.
    reports_at = next(
        i for i, r in enumerate(routes) if _first_match([r], progress_path, "POST") is not None
    )
    assert reports_at <= 1, reports_at
    assert _first_match(routes, progress_path, "POST").__name__ == "progress"
    # The order the routers were included in is the reference for what a path reaches.
    reference = FastAPI()
    for router in app_module.ROUTERS:
        reference.include_router(router)
    every = [r for router in app_module.ROUTERS for r in _flat(router.routes)]
    assert len(every) > 40
    for route in every:
        for method in route.methods:
            path = _sample(route)
            assert _first_match(routes, path, method) is _first_match(
                reference.router.routes, path, method
            ), (method, path)
    process = _first_match(routes, "/api/v1/runs/process/p1/progress", "POST")
    assert process.__module__ == "watchkeeper.server.api.procs"
    # The OpenAPI document is what FastAPI makes of the routers in the order they were included.
    expected = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=reference.routes
    )
    documented = app.openapi()
    assert list(documented["paths"]) == list(expected["paths"])
    assert documented == expected


def test_a_run_id_the_server_makes_is_never_masked_where_it_is_shown(
    api: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen random hex digits are now and then all decimal and pass Luhn's check (about
    1 in 20,000): shown through the redaction every page, card and answer applies, such an
    id read "[card]" and linked nowhere."""
    monkeypatch.setattr(reports_module, "secrets", SimpleNamespace(token_hex=_card_like))
    with api.client("reporter") as http:
        answer = http.post("/api/v1/runs", json={"kind": "crawl", "title": "no id given"})
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["run_id"]
    assert run_id.startswith("r-")
    assert redact(run_id) == run_id


def _card_like(_size: int) -> str:
    return "3575362989975381"  # passes Luhn's check
