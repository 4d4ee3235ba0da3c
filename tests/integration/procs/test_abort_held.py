"""Aborts wait out their grace period on the event loop: no worker thread is held.

A real server on loopback whose worker pool is shrunk to a few threads, real
process groups that ignore SIGTERM, and aborts with a long grace period: while
the aborts wait, the short requests (health, runs) still answer. The engine's
async abort keeps every outcome of the blocking one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import anyio.to_thread
import httpx
import pytest

from watchkeeper.clock import utcnow
from watchkeeper.errors import NotFound
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs import identity
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import AbortOutcome, NewProc, ProcStatus, Started
from watchkeeper.runtime import Runtime
from watchkeeper.server.http.longpoll import LongWaits
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.live_server import LiveServer, live_server
from ...support.waiting import wait_for
from .conftest import kill_leftovers, start_detached

#: Worker threads the test server keeps; more aborts than this are sent at once.
THREADS = 3
ABORTS = THREADS + 3
#: Far longer than the test: an abort still waiting its grace is plainly pending.
LONG_GRACE_S = 300
STUBBORN = ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"]
PROMPT_S = 10.0


@pytest.fixture
def served(tmp_path: Path, store: Store) -> Iterator[tuple[LiveServer, LongWaits]]:
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, store=store, clock=utcnow, notifier=OpsNotifier(settings.ops))
    caps = LongWaits(per_token=ABORTS, total=64)
    try:
        with live_server(runtime) as server:
            assert server.server is not None
            server.server.config.app.state.abort_waits = caps
            _shrink_worker_pool(server, THREADS)
            yield server, caps
    finally:
        runtime.sweeper.close()
        kill_leftovers(ProcEngine(store, settings.data_dir))


def _shrink_worker_pool(server: LiveServer, threads: int) -> None:
    """Give the server's sync routes ``threads`` worker threads (it runs with 40)."""
    assert server.server is not None
    loop = server.server.servers[0].get_loop()

    async def shrink() -> None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = threads

    asyncio.run_coroutine_threadsafe(shrink(), loop).result(timeout=PROMPT_S)


def _start_stubborn(http: httpx.Client) -> dict[str, object]:
    started = http.post("/api/v1/procs", json={"argv": STUBBORN, "name": "stubborn"})
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    wait_for(lambda: http.get(f"/api/v1/procs/{run_id}").json()["pid"] is not None)
    run: dict[str, object] = http.get(f"/api/v1/procs/{run_id}").json()
    return run


def _kill_group(server: LiveServer, run: dict[str, object]) -> None:
    """SIGKILL a test run's group ourselves, after checking its leader is still ours."""
    found = _engine(server).get(str(run["id"]))
    if found.pid is None or found.pgid is None:
        return
    if identity.start_time(found.pid, allow_zombie=True) == found.pid_start:
        os.killpg(found.pgid, signal.SIGKILL)


def _engine(server: LiveServer) -> ProcEngine:
    return ProcEngine(server.runtime.store, server.runtime.settings.data_dir)


def _abort_requested(server: LiveServer, run: dict[str, object]) -> bool:
    """Whether the run's record says an abort was asked for (read from the store itself)."""
    return _engine(server).get(str(run["id"])).abort_requested_at is not None


def test_aborts_in_their_grace_period_leave_the_api_answering(
    served: tuple[LiveServer, LongWaits],
) -> None:
    server, caps = served
    with (
        server.client("admin") as http,
        httpx.Client(base_url=server.url, timeout=LONG_GRACE_S + 60) as slow,
        ThreadPoolExecutor(ABORTS) as pool,
    ):
        runs = [_start_stubborn(http) for _ in range(ABORTS)]
        admin = {"Authorization": f"Bearer {server.tokens['admin']}"}

        def abort(run_id: object) -> httpx.Response:
            return slow.post(
                f"/api/v1/procs/{run_id}/abort", json={"grace_s": LONG_GRACE_S}, headers=admin
            )

        aborts: list[Future[httpx.Response]] = [pool.submit(abort, run["id"]) for run in runs]
        try:
            # Every abort has sent its SIGTERM and is waiting out its grace period.
            for run in runs:
                wait_for(lambda run=run: _abort_requested(server, run))
            with server.client("viewer") as viewer:
                health = viewer.get("/healthz")
                listed = viewer.get("/api/v1/runs")
                procs = viewer.get("/api/v1/procs")
            assert [r.status_code for r in (health, listed, procs)] == [200, 200, 200]
            assert not any(f.done() for f in aborts), "the aborts were still to be waiting"
            assert caps.in_use == ABORTS
        finally:
            for run in runs:  # the grace period would last minutes: end the groups ourselves
                _kill_group(server, run)
        answers = [f.result() for f in aborts]
    assert [a.status_code for a in answers] == [200] * ABORTS, [a.text for a in answers]
    assert {a.json()["outcome"] for a in answers} == {"signaled"}
    assert {a.json()["run"]["status"] for a in answers} == {"cancelled"}
    assert caps.in_use == 0


def test_aborts_have_caps_of_their_own(
    served: tuple[LiveServer, LongWaits],
) -> None:
    server, caps = served
    with (
        server.client("admin") as http,
        httpx.Client(base_url=server.url, timeout=LONG_GRACE_S + 60) as slow,
        ThreadPoolExecutor(ABORTS) as pool,
    ):
        runs = [_start_stubborn(http) for _ in range(ABORTS + 1)]
        admin = {"Authorization": f"Bearer {server.tokens['admin']}"}
        held = [
            pool.submit(
                slow.post,
                f"/api/v1/procs/{run['id']}/abort",
                json={"grace_s": LONG_GRACE_S},
                headers=admin,
            )
            for run in runs[:ABORTS]
        ]
        try:
            wait_for(lambda: caps.in_use == ABORTS)
            over = http.post(f"/api/v1/procs/{runs[-1]['id']}/abort", json={"grace_s": 1})
            assert over.status_code == 429, over.text
            assert over.json()["error"]["code"] == "too_many_requests"
            assert f"already has {ABORTS} aborts" in over.json()["error"]["message"]
            assert int(over.headers["retry-after"]) > 0
            assert not _abort_requested(server, runs[-1]), "a refused abort signalled nothing"
        finally:
            for run in runs:
                _kill_group(server, run)
        assert {f.result().status_code for f in held} == {200}


# The engine's async abort: the same outcomes as the blocking one ------------------------


def test_async_abort_sigkills_a_group_that_ignores_sigterm(engine: ProcEngine) -> None:
    run = start_detached(engine, *STUBBORN)
    wait_for(lambda: engine.get(run.run_id).pid is not None)
    result = asyncio.run(engine.abort_async(run.run_id, grace_s=0.2))
    assert result.outcome is AbortOutcome.SIGNALED
    assert result.run.status is ProcStatus.CANCELLED
    assert result.run.signal == 9


def test_async_abort_of_a_group_that_obeys_sigterm(engine: ProcEngine) -> None:
    run = start_detached(engine, "sleep", "300")
    wait_for(lambda: engine.get(run.run_id).pid is not None)
    result = asyncio.run(engine.abort_async(run.run_id, grace_s=LONG_GRACE_S))
    assert result.outcome is AbortOutcome.SIGNALED
    assert result.run.signal == 15
    assert result.run.reason == "aborted on request: killed by signal 15 (SIGTERM)"


def test_async_abort_of_a_recycled_pid_signals_nothing(engine: ProcEngine) -> None:
    unrelated = subprocess.Popen(["sleep", "120"])
    try:
        now = utcnow()
        new = NewProc(
            "p-recycled0002",
            "old",
            ("sleep", "1"),
            "/",
            identity.host(),
            "me",
            identity.boot_id(),
            detach=True,
        )
        engine.procs.register(new, now)
        engine.procs.mark_started(
            new.run_id, Started(unrelated.pid, "t1", unrelated.pid, "t1", unrelated.pid), now
        )
        result = asyncio.run(engine.abort_async(new.run_id))
        assert result.outcome is AbortOutcome.NOT_OURS
        assert unrelated.poll() is None  # still running: nothing was signaled
        assert result.run.status is ProcStatus.FAILED
    finally:
        unrelated.kill()
        unrelated.wait()


def test_async_abort_of_an_ended_or_unknown_run(engine: ProcEngine) -> None:
    run = start_detached(engine, "true")
    wait_for(lambda: engine.refresh(run.run_id).status.ended)
    again = asyncio.run(engine.abort_async(run.run_id))
    assert again.outcome is AbortOutcome.ALREADY_EXITED
    with pytest.raises(NotFound, match="no process run 'p-missing'"):
        asyncio.run(engine.abort_async("p-missing"))
