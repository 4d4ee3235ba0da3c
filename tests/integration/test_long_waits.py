"""Held requests (long-polls, event streams) cost no worker thread and are capped.

Sixty viewers wait on a real ``sleep`` started through the procs API; while
they wait, the rest of the API (reads, health, push reports, lease renewals)
answers, and past the caps a held request is refused at once with ``429``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.runtime import Runtime
from watchkeeper.server.http.longpoll import LongWaits, long_waits_of
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for, wait_for_async
from ..support.web_login import log_in
from .procs.conftest import kill_leftovers

HELD = 60
#: Longer than any answer needs, shorter than a long-poll: a request stuck behind the
#: long-polls fails instead of waiting for them to return.
PROMPT_S = 10.0
POLL_S = 30


@pytest.fixture
def served_runtime(tmp_path: Path, store: Store) -> Iterator[Runtime]:
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, store=store, clock=utcnow, notifier=OpsNotifier(settings.ops))
    yield runtime
    runtime.sweeper.close()
    kill_leftovers(ProcEngine(store, settings.data_dir))


def _in_flight(server: LiveServer) -> int:
    assert server.server is not None
    return len(server.server.server_state.tasks)


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def _start_sleep(http: httpx.AsyncClient, admin: str) -> str:
    started = await http.post(
        "/api/v1/procs", json={"argv": ["sleep", "600"], "name": "held"}, headers=_auth(admin)
    )
    assert started.status_code == 201, started.text
    run_id: str = started.json()["id"]
    return run_id


async def _leased_task(http: httpx.AsyncClient, admin: str, reporter: str) -> dict[str, Any]:
    job = await http.post(
        "/api/v1/jobs",
        json={
            "title": "build",
            "org": "acme",
            "fleet": "cpu",
            "payload": {"argv": ["make"]},
            "lease_s": 600,
        },
        headers=_auth(admin),
    )
    assert job.status_code == 201, job.text
    runner = await http.post(
        "/api/v1/runners",
        json={"fleet": "cpu", "capacity": 1, "host": "h", "pid": 7},
        headers=_auth(reporter),
    )
    assert runner.status_code == 201, runner.text
    leased = await http.post(
        f"/api/v1/runners/{runner.json()['id']}/lease", json={"max": 1}, headers=_auth(reporter)
    )
    [task] = leased.json()["tasks"]
    assert isinstance(task, dict)
    return task


def test_held_long_polls_leave_the_rest_of_the_api_answering(served_runtime: Runtime) -> None:
    caps = LongWaits(per_token=HELD + 4, total=500)
    with live_server(served_runtime, long_waits=caps) as server:
        answers = asyncio.run(_hold_and_use(server, caps))
    # Ending the run woke every long-poll (it waits on the process, not a clock).
    assert len(answers) == HELD + 4
    assert {(a.status_code, a.json()["status"]) for a in answers} == {(200, "cancelled")}
    assert caps.in_use == 0


async def _hold_and_use(server: LiveServer, caps: LongWaits) -> list[httpx.Response]:
    """Hold long-polls, use the rest of the API meanwhile, then end the run; the polls' answers."""
    admin, reporter, viewer = (server.tokens[r] for r in ("admin", "reporter", "viewer"))
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    timeout = httpx.Timeout(PROMPT_S)
    async with (
        httpx.AsyncClient(base_url=server.url, limits=limits, timeout=timeout) as http,
        httpx.AsyncClient(base_url=server.url, limits=limits, timeout=POLL_S + 30) as polls,
    ):
        run_id = await _start_sleep(http, admin)
        task = await _leased_task(http, admin, reporter)

        def poll() -> asyncio.Task[httpx.Response]:
            return asyncio.create_task(
                polls.get(
                    f"/api/v1/procs/{run_id}/wait",
                    params={"timeout_s": POLL_S},
                    headers=_auth(viewer),
                )
            )

        held = [poll() for _ in range(HELD)]
        await wait_for_async(
            lambda: _in_flight(server) >= HELD, what=f"{HELD} long-polls in flight"
        )

        # While every long-poll is held, the rest of the API answers.
        runs = await http.get("/api/v1/runs", headers=_auth(viewer))
        health = await http.get("/healthz")
        report = await http.post(
            "/api/v1/runs",
            json={"kind": "crawl", "run_id": "c-1", "title": "t"},
            headers=_auth(reporter),
        )
        moved = await http.post(
            "/api/v1/runs/crawl/c-1/progress", json={"step": "page 2"}, headers=_auth(reporter)
        )
        renewed = await http.post(
            f"/api/v1/tasks/{task['id']}/renew",
            json={"lease_token": task["lease_token"], "progressed": True},
            headers=_auth(reporter),
        )
        assert [r.status_code for r in (runs, health, report, moved, renewed)] == [
            200,
            200,
            201,
            200,
            200,
        ]
        assert not any(t.done() for t in held), "the long-polls were still to be held"
        assert caps.in_use == HELD

        # The token's 61st to 64th long-polls are held too; its 65th is refused at once.
        held += [poll() for _ in range(4)]
        await wait_for_async(lambda: caps.in_use == HELD + 4, what="64 held long-polls")
        refused = await http.get(
            f"/api/v1/procs/{run_id}/wait", params={"timeout_s": POLL_S}, headers=_auth(viewer)
        )
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) > 0
        message = refused.json()["error"]["message"]
        assert "64" in message and "retry" in message
        assert not any(t.done() for t in held)

        aborted = await http.post(
            f"/api/v1/procs/{run_id}/abort", json={"grace_s": 1}, headers=_auth(admin)
        )
        assert aborted.status_code == 200, aborted.text
        return list(await asyncio.gather(*held))


def _viewer(server: LiveServer, name: str) -> tuple[int, str]:
    info, secret = server.runtime.store.tokens.create(Role.VIEWER, name, server.runtime.clock())
    return info.id, secret


def _login(web: httpx.Client, secret: str) -> None:
    log_in(web, secret)


def test_streams_and_long_polls_share_the_caps(served_runtime: Runtime) -> None:
    caps = LongWaits(per_token=2, total=3)
    with live_server(served_runtime, long_waits=caps) as server:
        (first_id, first), (_, second) = _viewer(server, "first"), _viewer(server, "second")
        with (
            httpx.Client(base_url=server.url, timeout=PROMPT_S) as http,
            httpx.Client(base_url=server.url, timeout=PROMPT_S) as web,
        ):
            admin = _auth(server.tokens["admin"])
            started = http.post("/api/v1/procs", json={"argv": ["sleep", "600"]}, headers=admin)
            run_id = started.json()["id"]
            wait_url = f"/api/v1/procs/{run_id}/wait"
            with http.stream("GET", "/api/v1/events", headers=_auth(first)) as events:
                assert events.status_code == 200
                _login(web, first)
                with web.stream("GET", f"/web/procs/{run_id}/log") as follow:
                    assert follow.status_code == 200
                    assert caps.held_by(first_id) == 2
                    # A third held request of the same token: refused, per token.
                    for url, client in (("/api/v1/events", http), (wait_url, http)):
                        over = client.get(url, headers=_auth(first))
                        assert over.status_code == 429, url
                        assert "2 long-polls or event streams" in over.json()["error"]["message"]
                    refused_page = web.get("/web/stream")
                    assert refused_page.status_code == 429
                    # Another token takes the last place, then the server is full.
                    with http.stream("GET", "/api/v1/events", headers=_auth(second)) as third:
                        assert third.status_code == 200
                        full = http.get(wait_url, headers=_auth(second))
                        assert full.status_code == 429
                        assert "server already holds 3" in full.json()["error"]["message"]
            # Closed streams give their places back.
            wait_for(lambda: caps.in_use == 0, what="the closed streams' places given back")
            again = http.get(wait_url, params={"timeout_s": 0}, headers=_auth(first))
            assert again.status_code == 200 and again.json()["status"] == "running"
            http.post(f"/api/v1/procs/{run_id}/abort", json={"grace_s": 1}, headers=admin)


def test_the_caps_come_from_the_server_settings(tmp_path: Path, store: Store) -> None:
    settings = make_settings(
        tmp_path, store.url, server={"long_waits_per_token": 3, "long_waits_total": 5}
    )
    runtime = Runtime.open(settings, store=store, clock=utcnow, notifier=OpsNotifier(settings.ops))
    try:
        with live_server(runtime) as server:
            with httpx.Client(base_url=server.url, timeout=PROMPT_S) as http:
                http.get("/healthz")
            from fastapi import FastAPI

            app = server.server.config.app if server.server is not None else None
            assert isinstance(app, FastAPI)
            caps = long_waits_of(app)
            assert (caps.per_token, caps.total) == (3, 5)
            holds = [caps.acquire(1) for _ in range(3)]
            with pytest.raises(Exception, match="3 long-polls"):
                caps.acquire(1)
            holds += [caps.acquire(2), caps.acquire(3)]
            with pytest.raises(Exception, match="server already holds 5"):
                caps.acquire(4)
            for hold in holds:
                hold.release()
                hold.release()  # a second release gives nothing back twice
            assert caps.in_use == 0
    finally:
        runtime.sweeper.close()
