"""The arq engine kind against a real Redis and real arq workers (subprocesses).

A hung job is stalled within its budget, a job whose worker is killed with SIGKILL is stuck
once its in-progress lease lapses, a failure is failed; Cancel aborts and Retry enqueues the
same call again, through arq, and arq shows it. On both stores.
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
from arq import create_pool
from arq.connections import RedisSettings
from arq.jobs import deserialize_result

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import Condition, RunStatus
from watchkeeper.decide.decider import Outcome
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.engines.arq import ArqAdapter

from ...support.live_server import free_port
from ...support.redis_server import RedisServer
from ...support.waiting import wait_for
from ...support.workers import kill_group, worker
from ..helpers import sweep
from .conftest import ANA, OpenRuntime, live_incident, past_budget, run_of

pytestmark = pytest.mark.slow(seconds=40)
BUDGET_S = 300
DB = 4
QUEUE = "arq:queue"


@pytest.fixture(scope="module")
def arq_url(redis: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One arq worker on the default queue for the module."""
    url = redis.url(DB)
    log = tmp_path_factory.mktemp("arq") / "worker.log"
    with worker(["arq_app", QUEUE, "600"], {"WK_TEST_REDIS": url}, log):
        conn = redis_client.Redis.from_url(url)
        wait_for(lambda: conn.exists(f"{QUEUE}:health-check"), what="the arq worker up")
        yield url


def kinds(url: str, queue: str = QUEUE) -> dict[str, Any]:
    return {"jobs": {"engine": "arq", "url": url, "queue": queue, "budget_s": BUDGET_S}}


def enqueue(url: str, queue: str, function: str, *args: Any) -> str:
    async def send() -> str:
        pool = await create_pool(RedisSettings.from_dsn(url), default_queue_name=queue)
        job = await pool.enqueue_job(function, *args)
        await pool.aclose()
        assert job is not None
        return str(job.job_id)

    return asyncio.run(send())


def results(url: str) -> list[Any]:
    conn = redis_client.Redis.from_url(url)
    keys = list(conn.scan_iter(match="arq:result:*"))
    return [deserialize_result(raw) for raw in conn.mget(keys) if raw] if keys else []


def result_of(url: str, job_id: str) -> Any:
    raw = redis_client.Redis.from_url(url).get(f"arq:result:{job_id}")
    return None if raw is None else deserialize_result(raw)


def gate() -> str:
    return f"gate-{uuid.uuid4().hex[:8]}"


def test_a_hung_job_is_stalled_within_its_budget_and_cancel_aborts_it(
    arq_url: str, engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    runtime = engine_runtime(kinds(arq_url))
    job_id = enqueue(arq_url, QUEUE, "hang", gate())
    run = wait_for(
        lambda: (r := run_of(runtime, "jobs", job_id, now_clock())) and r.owner.alive and r,
        what="the hung job read as held by a worker",
    )
    assert run.status is RunStatus.RUNNING
    assert run.title == "hang"
    assert not sweep(runtime).applied.opened
    past_budget(now_clock, run, BUDGET_S)
    sweep(runtime)
    incident = live_incident(runtime, job_id)
    assert incident is not None and incident.key.condition == Condition.STALLED.value
    pressed = runtime.decider.press(incident.id, "cancel", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    done = wait_for(lambda: result_of(arq_url, job_id), what="arq recording the job's end")
    assert not done.success and type(done.result).__name__ == "CancelledError"
    sweep(runtime)
    assert live_incident(runtime, job_id) is None
    ended = run_of(runtime, "jobs", job_id, now_clock())
    assert ended is not None and ended.status is RunStatus.CANCELLED


def test_a_failure_is_failed_and_retry_enqueues_the_same_call_again(
    arq_url: str, engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    runtime = engine_runtime(kinds(arq_url))
    counter = f"counter-{uuid.uuid4().hex[:8]}"
    job_id = enqueue(arq_url, QUEUE, "flaky", counter)
    wait_for(lambda: result_of(arq_url, job_id), what="the first attempt failing")
    sweep(runtime)
    incident = live_incident(runtime, job_id)
    assert incident is not None and incident.key.condition == Condition.FAILED.value
    assert incident.reason == "RuntimeError: the first attempt fails"
    pressed = runtime.decider.press(incident.id, "retry_checked", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    again = wait_for(
        lambda: [r for r in results(arq_url) if r.args == (counter,) and r.success],
        what="the same call succeeding",
    )
    assert again[0].function == "flaky" and again[0].job_id != job_id


def test_a_job_whose_worker_is_killed_is_stuck_once_its_lease_lapses(
    arq_url: str, engine_runtime: OpenRuntime, now_clock: ManualClock, tmp_path: Path
) -> None:
    queue = f"doomed-{uuid.uuid4().hex[:6]}"
    runtime = engine_runtime(kinds(arq_url, queue))
    env = {"WK_TEST_REDIS": arq_url}
    # A one-second job timeout: arq's in-progress lease is the timeout plus 10 s.
    with worker(["arq_app", queue, "1"], env, tmp_path / "w.log") as doomed:
        job_id = enqueue(arq_url, queue, "hang", gate())
        wait_for(
            lambda: (r := run_of(runtime, "jobs", job_id, now_clock())) and r.owner.alive,
            what="the job held by the worker",
        )
        conn = redis_client.Redis.from_url(arq_url)
        # Held, and started: arq counts the try as the job begins.
        wait_for(lambda: conn.exists(f"arq:retry:{job_id}"), what="the job started")
        kill_group(doomed, signal.SIGKILL)
        doomed.wait(timeout=20)
    wait_for(lambda: not conn.exists(f"arq:in-progress:{job_id}"), what="the lease lapsing")
    sweep(runtime)
    incident = live_incident(runtime, job_id)
    assert incident is not None and incident.key.condition == Condition.STUCK.value
    assert incident.reason == "its owner stopped reporting: the lease lapsed"


def test_an_unreachable_redis_is_unreadable_naming_it() -> None:
    closed = free_port()
    table = {"engine": "arq", "url": f"redis://127.0.0.1:{closed}/0"}
    settings = config.parse({"kinds": {"jobs": table}}, "test")
    adapter = ArqAdapter("jobs", KindConfig(**table), AdapterContext(settings, None))
    read = asyncio.run(adapter.read_contained(datetime.now(UTC)))
    assert read.error is not None
    assert read.error.startswith(f"cannot reach arq's Redis at redis://127.0.0.1:{closed}/0")


class _Planted:
    """A pickle that, loaded with pickle, would run a command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.system, (f"touch {self.marker}",))


def test_stored_pickles_are_read_without_running_what_they_name(tmp_path: Path) -> None:
    import pickle

    from watchkeeper.kinds.engines._pickles import Named, peek

    marker = tmp_path / "ran"
    found = peek(pickle.dumps({"f": "hang", "r": _Planted(marker), "e": ValueError("bad x")}))
    assert not marker.exists()
    assert isinstance(found, dict) and found["f"] == "hang"
    assert isinstance(found["r"], Named) and found["r"].name == "system"
    assert str(found["e"]) == "ValueError: bad x"
