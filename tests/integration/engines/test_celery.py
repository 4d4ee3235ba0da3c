"""The celery engine kind against a real Redis and real Celery workers (subprocesses).

A hung task is stalled within its budget, a task whose worker is killed with SIGKILL is stuck,
a failure is failed; Cancel and Retry act through Celery and Celery shows it. On both stores.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis as redis_client
from celery import Celery
from celery.result import AsyncResult

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import Condition, RunStatus
from watchkeeper.decide.decider import Outcome
from watchkeeper.errors import KindUnreadable
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.engines.celery import CeleryAdapter

from ...support.live_server import free_port
from ...support.redis_server import RedisServer
from ...support.tcp_proxy import TcpProxy
from ...support.waiting import wait_for
from ...support.workers import kill_group, worker
from ..helpers import sweep
from .conftest import ANA, OpenRuntime, live_incident, past_budget, run_of

pytestmark = pytest.mark.slow(seconds=40)
BUDGET_S = 300
#: The database of the module's broker and backend; each test that needs its own app uses another.
DB = 1


def worker_argv(name: str, queue: str) -> list[str]:
    return [
        *("celery", "-A", "celery_app", "worker", "-P", "prefork", "-c", "3"),
        *("-n", f"{name}@wktest", "-Q", queue, "-l", "warning"),
        *("--without-gossip", "--without-mingle", "--without-heartbeat"),
    ]


class Client:
    """The test's side of the Celery app: send tasks, read what Celery says of them."""

    def __init__(self, broker: str, backend: str | None) -> None:
        self.app = Celery("wk_test_client", broker=broker, backend=backend)

    def send(self, name: str, queue: str, *args: Any) -> str:
        return str(self.app.send_task(name, args=list(args), queue=queue).id)

    def state(self, task_id: str) -> str:
        return str(AsyncResult(task_id, app=self.app).state)

    def workers(self) -> set[str]:
        return set(self.app.control.inspect(timeout=0.5).ping() or {})


@pytest.fixture(scope="module")
def celery_setup(
    redis: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Client]]:
    """One worker on queue ``main`` for the module, and the client that talks to it."""
    url = redis.url(DB)
    client = Client(url, url)
    log = tmp_path_factory.mktemp("celery") / "worker.log"
    with worker(worker_argv("main", "main"), {"WK_TEST_BROKER": url}, log):
        wait_for(lambda: "main@wktest" in client.workers(), what="the Celery worker up")
        yield url, client
    client.app.close()


def kinds(url: str, **extra: Any) -> dict[str, Any]:
    return {"jobs": {"engine": "celery", "url": url, "budget_s": BUDGET_S, **extra}}


def gate() -> str:
    return f"gate-{uuid.uuid4().hex[:8]}"


def test_a_hung_task_is_stalled_within_its_budget_and_cancel_revokes_it(
    celery_setup: tuple[str, Client], engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    url, client = celery_setup
    runtime = engine_runtime(kinds(url))
    task_id = client.send("hang", "main", gate())
    run = wait_for(
        lambda: (r := run_of(runtime, "jobs", task_id, now_clock())) and r.owner.alive and r,
        what="the hung task read as running on a live worker",
    )
    assert run.status is RunStatus.RUNNING
    assert run.title == "hang"
    assert run.owner.ident == "main@wktest"
    assert not sweep(runtime).applied.opened
    past_budget(now_clock, run, BUDGET_S)
    sweep(runtime)
    incident = live_incident(runtime, task_id)
    assert incident is not None and incident.key.condition == Condition.STALLED.value
    pressed = runtime.decider.press(incident.id, "cancel", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    wait_for(lambda: client.state(task_id) == "REVOKED", what="Celery showing the task revoked")
    sweep(runtime)
    assert live_incident(runtime, task_id) is None
    ended = run_of(runtime, "jobs", task_id, now_clock())
    assert ended is not None and ended.status is RunStatus.CANCELLED


def test_a_task_read_before_its_started_state_is_stored_still_stalls(
    celery_setup: tuple[str, Client],
    engine_runtime: OpenRuntime,
    now_clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The backend is read before the workers are asked, so a task that starts in between
    is first listed by its worker with no state stored; the STARTED record that appears
    after only restates its start and is no progress."""
    url, client = celery_setup
    runtime = engine_runtime(kinds(url))
    adapter = runtime.sweeper.adapters["jobs"]
    opened = gate()
    task_id = client.send("hang", "main", opened)
    try:
        wait_for(lambda: client.state(task_id) == "STARTED", what="the task started")
        with monkeypatch.context() as backend_read_too_early:
            backend_read_too_early.setattr(adapter, "_backend_metas", lambda only=None: {})
            run = wait_for(
                lambda: (
                    (r := run_of(runtime, "jobs", task_id, now_clock())) and r.owner.alive and r
                ),
                what="the task listed by its worker with no state stored",
            )
        past_budget(now_clock, run, BUDGET_S)
        sweep(runtime)
        incident = live_incident(runtime, task_id)
        assert incident is not None and incident.key.condition == Condition.STALLED.value
    finally:
        redis_client.Redis.from_url(url).rpush(opened, "go")


def test_progress_reported_with_update_state_keeps_a_task_from_stalling(
    celery_setup: tuple[str, Client], engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    url, client = celery_setup
    runtime = engine_runtime(kinds(url))
    opened = gate()
    task_id = client.send("steps", "main", opened, 3)
    wait_for(lambda: run_of(runtime, "jobs", task_id, now_clock()), what="the task running")
    redis_client.Redis.from_url(url).rpush(opened, "go")
    run = wait_for(
        lambda: (r := run_of(runtime, "jobs", task_id, now_clock())) and r.step and r,
        what="its first step read",
    )
    assert run.step is not None and '"done": 1' in run.step
    moved_at = run.progress_at
    now_clock.advance(BUDGET_S - 10)
    redis_client.Redis.from_url(url).rpush(opened, "go")
    run = wait_for(
        lambda: (
            (r := run_of(runtime, "jobs", task_id, now_clock())) and r.progress_at != moved_at and r
        ),
        what="its second step read",
    )
    assert run.progress_at == now_clock()
    now_clock.advance(BUDGET_S - 10)  # long past its start, but not past its last step
    sweep(runtime)
    assert live_incident(runtime, task_id) is None
    now_clock.advance(20)
    sweep(runtime)
    incident = live_incident(runtime, task_id)
    assert incident is not None and incident.key.condition == Condition.STALLED.value
    redis_client.Redis.from_url(url).rpush(opened, "go")


def test_a_failure_is_failed_and_retry_sends_the_same_task_again(
    celery_setup: tuple[str, Client], engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    url, client = celery_setup
    runtime = engine_runtime(kinds(url))
    task_id = client.send("flaky", "main", f"counter-{uuid.uuid4().hex[:8]}")
    wait_for(lambda: client.state(task_id) == "FAILURE", what="the first attempt failing")
    sweep(runtime)
    incident = live_incident(runtime, task_id)
    assert incident is not None and incident.key.condition == Condition.FAILED.value
    assert incident.reason == "RuntimeError: the first attempt fails"
    # Nobody said its effects are none: the only retry is one whose presser checked them.
    offered = [a.value for a in runtime.decider.offered(incident)]
    assert "retry_checked" in offered and "retry" not in offered
    pressed = runtime.decider.press(incident.id, "retry_checked", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    wait_for(lambda: client.state(task_id) == "SUCCESS", what="the same task id succeeding")
    sweep(runtime)
    assert live_incident(runtime, task_id) is None


def test_a_task_whose_worker_is_killed_is_stuck(
    celery_setup: tuple[str, Client],
    engine_runtime: OpenRuntime,
    now_clock: ManualClock,
    tmp_path: Path,
) -> None:
    url, client = celery_setup
    runtime = engine_runtime(kinds(url))
    queue = f"doomed-{uuid.uuid4().hex[:6]}"
    with worker(worker_argv(queue, queue), {"WK_TEST_BROKER": url}, tmp_path / "w.log") as doomed:
        wait_for(lambda: f"{queue}@wktest" in client.workers(), what="the second worker up")
        task_id = client.send("hang", queue, gate())
        wait_for(
            lambda: (r := run_of(runtime, "jobs", task_id, now_clock())) and r.owner.alive,
            what="the task running on the second worker",
        )
        kill_group(doomed, signal.SIGKILL)
        doomed.wait(timeout=20)
        # Two reads in a row must find it held by nobody: the first only suspects.
        first = run_of(runtime, "jobs", task_id, now_clock())
        assert first is not None and first.owner.alive is None
        sweep(runtime)
    incident = live_incident(runtime, task_id)
    assert incident is not None and incident.key.condition == Condition.STUCK.value
    assert incident.reason == "the runner that leased it is gone"
    pressed = runtime.decider.press(incident.id, "cancel", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    assert client.state(task_id) == "REVOKED"


def test_an_unreachable_engine_is_unreadable_and_keeps_its_incidents(
    celery_setup: tuple[str, Client], engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    url, client = celery_setup
    proxy = TcpProxy(("127.0.0.1", int(url.split(":")[2].split("/")[0])))
    opened = gate()
    try:
        runtime = engine_runtime(kinds(f"redis://127.0.0.1:{proxy.port}/{DB}"))
        task_id = client.send("hang", "main", opened)
        run = wait_for(
            lambda: (r := run_of(runtime, "jobs", task_id, now_clock())) and r.owner.alive and r,
            what="the task running on a live worker",
        )
        past_budget(now_clock, run, BUDGET_S)
        sweep(runtime)
        assert live_incident(runtime, task_id) is not None
        proxy.cut()
        result = sweep(runtime)
        read = next(r for r in result.reads if r.kind == "jobs")
        assert read.error is not None and read.error.startswith("cannot reach Celery's result")
        assert f"redis://127.0.0.1:{proxy.port}/{DB}" in read.error
        assert live_incident(runtime, task_id) is not None
    finally:
        proxy.close()
        redis_client.Redis.from_url(url).rpush(opened, "go")


def adapter_for(url: str, **options: Any) -> CeleryAdapter:
    table = {"engine": "celery", "url": url, **options}
    settings = config.parse({"kinds": {"jobs": table}}, "test")
    return CeleryAdapter("jobs", KindConfig(**table), AdapterContext(settings, None))


def test_a_wrong_url_names_what_cannot_be_reached() -> None:
    closed = free_port()
    adapter = adapter_for(f"redis://127.0.0.1:{closed}/0")
    read = asyncio.run(adapter.read_contained(datetime.now(UTC)))
    assert read.error is not None
    assert read.error.startswith(
        f"cannot reach Celery's result backend at redis://127.0.0.1:{closed}/0"
    )


def test_results_stored_elsewhere_are_named_once_a_listed_task_has_no_state_for_a_minute(
    redis: RedisServer, tmp_path: Path, now_clock: ManualClock
) -> None:
    broker, elsewhere = redis.url(DB + 2), redis.url(DB + 3)
    client = Client(broker, elsewhere)
    opened = gate()
    env = {"WK_TEST_BROKER": broker, "WK_TEST_BACKEND": elsewhere}
    with worker(worker_argv("apart", "apart"), env, tmp_path / "w.log"):
        wait_for(lambda: "apart@wktest" in client.workers(), what="the worker up")
        adapter = adapter_for(broker)
        try:
            client.send("hang", "apart", opened)
            # Listed with no state here is no proof yet: the state may be on its way.
            assert wait_for(lambda: adapter.read(now_clock()), what="the task listed")
            now_clock.advance(61)
            with pytest.raises(KindUnreadable) as refused:
                adapter.read(now_clock())
        finally:
            redis_client.Redis.from_url(broker).rpush(opened, "go")
            adapter.close()
    assert str(refused.value) == (
        f"the Celery workers store results at {elsewhere}, not at {broker}: "
        "set kinds.jobs.backend to it"
    )


def test_an_app_without_a_result_backend_is_told_what_is_missing(
    redis: RedisServer, tmp_path: Path
) -> None:
    url = redis.url(DB + 1)
    client = Client(url, None)
    env = {"WK_TEST_BROKER": url, "WK_TEST_BACKEND": ""}
    with worker(worker_argv("plain", "plain"), env, tmp_path / "w.log"):
        wait_for(lambda: "plain@wktest" in client.workers(), what="the worker up")
        adapter = adapter_for(url)
        read = asyncio.run(adapter.read_contained(datetime.now(UTC)))
    assert read.error is not None
    assert read.error.startswith("the Celery app has no result backend")
    assert "result_backend" in read.error and "task_track_started" in read.error
