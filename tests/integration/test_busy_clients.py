"""Refused held requests: the ``429`` answer's shape, and the SDK asking again when told.

A real server on loopback whose caps on held requests are 1 per token; the
held request waits on a real ``sleep`` started through the procs API.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from watchkeeper import Client
from watchkeeper.clock import utcnow
from watchkeeper.errors import ClientError
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.runtime import Runtime
from watchkeeper.server.http.longpoll import LongWaits
from watchkeeper.store import Store

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for
from .procs.conftest import kill_leftovers

PROMPT_S = 30.0


@pytest.fixture
def served(tmp_path: Path, store: Store) -> Iterator[tuple[LiveServer, LongWaits]]:
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, store=store, clock=utcnow, notifier=OpsNotifier(settings.ops))
    caps = LongWaits(per_token=1, total=16)
    try:
        with live_server(runtime, long_waits=caps) as server:
            assert server.server is not None
            server.server.config.app.state.abort_waits = LongWaits(per_token=1, total=16)
            yield server, caps
    finally:
        runtime.sweeper.close()
        kill_leftovers(ProcEngine(store, settings.data_dir))


class _Recording(httpx.HTTPTransport):
    """A real transport that notes the status of every answer it got."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        with self._lock:
            self.statuses.append(response.status_code)
        return response


def _start(server: LiveServer, argv: list[str]) -> str:
    with server.client("admin") as http:
        started = http.post("/api/v1/procs", json={"argv": argv})
        assert started.status_code == 201, started.text
        run_id: str = started.json()["id"]
        return run_id


def _hold_wait(pool: ThreadPoolExecutor, server: LiveServer, run_id: str) -> Future[httpx.Response]:
    """A viewer's long-poll on ``run_id``, held in a thread."""

    def hold() -> httpx.Response:
        with httpx.Client(base_url=server.url, timeout=PROMPT_S + 30) as http:
            return http.get(
                f"/api/v1/procs/{run_id}/wait",
                params={"timeout_s": 30},
                headers={"Authorization": f"Bearer {server.tokens['viewer']}"},
            )

    return pool.submit(hold)


def test_a_refused_held_request_says_too_many_requests(
    served: tuple[LiveServer, LongWaits],
) -> None:
    server, caps = served
    run_id = _start(server, ["sleep", "600"])
    with ThreadPoolExecutor(1) as pool, server.client("viewer") as http:
        held = _hold_wait(pool, server, run_id)
        wait_for(lambda: caps.in_use == 1, what="the first long-poll held", timeout=PROMPT_S)
        refused = http.get(f"/api/v1/procs/{run_id}/wait", params={"timeout_s": 0})
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_requests"
        assert int(refused.headers["retry-after"]) > 0
        with server.client("admin") as admin:
            admin.post(f"/api/v1/procs/{run_id}/abort", json={"grace_s": 1})
        assert held.result().json()["status"] == "cancelled"


def test_the_sdk_waits_out_a_refusal_and_asks_again(served: tuple[LiveServer, LongWaits]) -> None:
    server, caps = served
    run_id = _start(server, ["sleep", "600"])
    recording = _Recording()
    with (
        ThreadPoolExecutor(2) as pool,
        Client(server.url, server.tokens["viewer"], transport=recording) as sdk,
    ):
        held = _hold_wait(pool, server, run_id)
        wait_for(lambda: caps.in_use == 1, what="the first long-poll held", timeout=PROMPT_S)
        waited = pool.submit(sdk.procs.wait, run_id, timeout_s=120)
        wait_for(lambda: 429 in recording.statuses, what="the SDK's wait refused", timeout=PROMPT_S)
        assert not waited.done(), "the SDK gave up on a 429 instead of asking again"
        with server.client("admin") as admin:
            admin.post(f"/api/v1/procs/{run_id}/abort", json={"grace_s": 1})
        assert held.result().json()["status"] == "cancelled"
        assert waited.result()["status"] == "cancelled"
        assert recording.statuses[0] == 429 and recording.statuses[-1] == 200


def test_the_sdk_stops_asking_at_the_callers_timeout(served: tuple[LiveServer, LongWaits]) -> None:
    server, caps = served
    run_id = _start(server, ["sleep", "600"])
    with ThreadPoolExecutor(1) as pool, Client(server.url, server.tokens["viewer"]) as sdk:
        held = _hold_wait(pool, server, run_id)
        wait_for(lambda: caps.in_use == 1, what="the first long-poll held", timeout=PROMPT_S)
        with pytest.raises(ClientError) as refused:
            sdk.procs.wait(run_id, timeout_s=0.2)
        assert refused.value.status == 429
        assert refused.value.code == "too_many_requests"
        with server.client("admin") as admin:
            admin.post(f"/api/v1/procs/{run_id}/abort", json={"grace_s": 1})
        assert held.result().json()["status"] == "cancelled"


def test_the_sdk_waits_longer_than_its_http_timeout(served: tuple[LiveServer, LongWaits]) -> None:
    """A long-poll outlasts the client's per-request timeout without being cut."""
    server, _caps = served
    run_id = _start(server, ["sleep", "3"])
    with Client(server.url, server.tokens["viewer"], timeout=1.0) as sdk:
        done = sdk.procs.wait(run_id, timeout_s=60)
    assert done["status"] == "succeeded"


def test_the_sdk_abort_waits_out_a_refusal_and_asks_again(
    served: tuple[LiveServer, LongWaits],
) -> None:
    server, _caps = served
    stubborn = _start(server, ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"])
    obedient = _start(server, ["sleep", "600"])
    engine = ProcEngine(server.runtime.store, server.runtime.settings.data_dir)
    wait_for(
        lambda: engine.get(stubborn).pid is not None,
        what="the stubborn run started",
        timeout=PROMPT_S,
    )
    recording = _Recording()
    with (
        ThreadPoolExecutor(2) as pool,
        Client(server.url, server.tokens["admin"]) as first,
        Client(server.url, server.tokens["admin"], transport=recording) as second,
    ):
        held = pool.submit(first.procs.abort, stubborn, grace_s=300)
        aborts = server.server.config.app.state.abort_waits if server.server else None
        assert isinstance(aborts, LongWaits)
        wait_for(
            lambda: aborts.in_use == 1, what="the first abort in its grace period", timeout=PROMPT_S
        )
        try:
            retried = pool.submit(second.procs.abort, obedient, grace_s=1)
            wait_for(
                lambda: 429 in recording.statuses, what="the second abort refused", timeout=PROMPT_S
            )
            assert not retried.done(), "the SDK gave up on a 429 instead of asking again"
        finally:
            run = engine.get(stubborn)  # its grace would last minutes: end it ourselves
            assert run.pgid is not None
            os.killpg(run.pgid, signal.SIGKILL)
        assert held.result()["outcome"] == "signaled"
        assert retried.result()["outcome"] == "signaled"
        assert recording.statuses[-1] == 200
