"""The rq engine kind against a real Redis and real RQ workers (subprocesses).

A hung job is stalled within its budget, a job whose worker is killed with SIGKILL is stuck,
a failure is failed; Cancel and Retry act through RQ and RQ shows it. On both stores.
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
from rq import Queue
from rq.job import Job

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import Condition, RunStatus
from watchkeeper.decide.decider import Outcome
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.engines.rq import RqAdapter

from ...support.live_server import free_port
from ...support.redis_server import RedisServer
from ...support.waiting import wait_for
from ...support.workers import kill_group, worker
from ..helpers import sweep
from .conftest import ANA, OpenRuntime, live_incident, past_budget, run_of

pytestmark = pytest.mark.slow(seconds=30)
BUDGET_S = 300
DB = 3


@pytest.fixture(scope="module")
def rq_url(redis: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One RQ worker on queue ``main`` for the module."""
    url = redis.url(DB)
    log = tmp_path_factory.mktemp("rq") / "worker.log"
    with worker(["rq_app", "main", "main"], {"WK_TEST_REDIS": url}, log):
        conn = redis_client.Redis.from_url(url)
        wait_for(lambda: conn.exists("rq:worker:main"), what="the RQ worker up")
        yield url


def kinds(url: str) -> dict[str, Any]:
    return {"jobs": {"engine": "rq", "url": url, "budget_s": BUDGET_S}}


def enqueue(url: str, queue: str, function: str, *args: Any) -> str:
    conn = redis_client.Redis.from_url(url)
    return str(Queue(queue, connection=conn).enqueue(f"rq_app.{function}", *args).id)


def status(url: str, job_id: str) -> str:
    conn = redis_client.Redis.from_url(url)
    return str(Job.fetch(job_id, connection=conn).get_status().value)


def gate() -> str:
    return f"gate-{uuid.uuid4().hex[:8]}"


def test_a_hung_job_is_stalled_within_its_budget_and_cancel_stops_it(
    rq_url: str, engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    runtime = engine_runtime(kinds(rq_url))
    job_id = enqueue(rq_url, "main", "hang", gate())
    run = wait_for(
        lambda: (r := run_of(runtime, "jobs", job_id, now_clock())) and r.owner.alive and r,
        what="the hung job read as running on a live worker",
    )
    assert run.status is RunStatus.RUNNING
    assert run.owner.ident == "main"
    assert run.title.startswith("rq_app.hang(")
    assert not sweep(runtime).applied.opened
    past_budget(now_clock, run, BUDGET_S)
    sweep(runtime)
    incident = live_incident(runtime, job_id)
    assert incident is not None and incident.key.condition == Condition.STALLED.value
    pressed = runtime.decider.press(incident.id, "cancel", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    wait_for(lambda: status(rq_url, job_id) == "stopped", what="RQ showing the job stopped")
    sweep(runtime)
    assert live_incident(runtime, job_id) is None


def test_meta_saved_by_the_job_is_its_progress(
    rq_url: str, engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    runtime = engine_runtime(kinds(rq_url))
    opened = gate()
    job_id = enqueue(rq_url, "main", "steps", opened, 3)
    first = wait_for(lambda: run_of(runtime, "jobs", job_id, now_clock()), what="the job running")
    assert first.progress_at is None  # nothing saved yet: judged from its start
    now_clock.advance(BUDGET_S - 10)
    redis_client.Redis.from_url(rq_url).rpush(opened, "go")
    wait_for(
        lambda: (r := run_of(runtime, "jobs", job_id, now_clock())) and r.progress_at,
        what="its first step read",
    )
    now_clock.advance(BUDGET_S - 10)  # long past its start, not past its last step
    sweep(runtime)
    assert live_incident(runtime, job_id) is None
    now_clock.advance(20)
    sweep(runtime)
    incident = live_incident(runtime, job_id)
    assert incident is not None and incident.key.condition == Condition.STALLED.value
    redis_client.Redis.from_url(rq_url).rpush(opened, "go", "go")


def test_a_failure_is_failed_and_retry_requeues_the_same_job(
    rq_url: str, engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    runtime = engine_runtime(kinds(rq_url))
    job_id = enqueue(rq_url, "main", "flaky", f"counter-{uuid.uuid4().hex[:8]}")
    wait_for(lambda: status(rq_url, job_id) == "failed", what="the first attempt failing")
    sweep(runtime)
    incident = live_incident(runtime, job_id)
    assert incident is not None and incident.key.condition == Condition.FAILED.value
    assert incident.reason == "RuntimeError: the first attempt fails"
    pressed = runtime.decider.press(incident.id, "retry_checked", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    wait_for(lambda: status(rq_url, job_id) == "finished", what="the same job finishing")
    sweep(runtime)
    assert live_incident(runtime, job_id) is None


def test_a_job_whose_worker_is_killed_is_stuck_and_retry_runs_it_again(
    rq_url: str, engine_runtime: OpenRuntime, now_clock: ManualClock, tmp_path: Path
) -> None:
    runtime = engine_runtime(kinds(rq_url))
    queue = f"doomed-{uuid.uuid4().hex[:6]}"
    env = {"WK_TEST_REDIS": rq_url}
    opened = gate()
    with worker(["rq_app", queue, queue], env, tmp_path / "w.log") as doomed:
        job_id = enqueue(rq_url, queue, "hang", opened)
        wait_for(
            lambda: (r := run_of(runtime, "jobs", job_id, now_clock())) and r.owner.alive,
            what="the job running on the second worker",
        )
        kill_group(doomed, signal.SIGKILL)
        doomed.wait(timeout=20)
    sweep(runtime)
    incident = live_incident(runtime, job_id)
    assert incident is not None and incident.key.condition == Condition.STUCK.value
    with worker(["rq_app", f"{queue}-2", queue], env, tmp_path / "w2.log"):
        pressed = runtime.decider.press(incident.id, "retry_checked", incident.state_token, ANA)
        assert pressed.outcome is Outcome.DONE, pressed.message
        redis_client.Redis.from_url(rq_url).rpush(opened, "go")
        wait_for(lambda: status(rq_url, job_id) == "finished", what="the job run again")


def test_an_unreachable_redis_is_unreadable_naming_it() -> None:
    closed = free_port()
    table = {"engine": "rq", "url": f"redis://127.0.0.1:{closed}/0"}
    settings = config.parse({"kinds": {"jobs": table}}, "test")
    adapter = RqAdapter("jobs", KindConfig(**table), AdapterContext(settings, None))
    read = asyncio.run(adapter.read_contained(datetime.now(UTC)))
    assert read.error is not None
    assert read.error.startswith(f"cannot reach RQ's Redis at redis://127.0.0.1:{closed}/0")
