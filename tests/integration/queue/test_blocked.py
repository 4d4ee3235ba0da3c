"""Every blocked reason, produced by a scenario on both databases."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from tests.integration.queue.conftest import make_service, runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.queue.launcher import CommandLauncher, LaunchRefused
from watchkeeper.queue.rules import Blocked, Reason
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Job
from watchkeeper.store import Store


def why(queue: QueueService, job: Job) -> Blocked:
    [task] = [t for t in queue.job(job.id).tasks if t.status.value == "queued"]
    return queue.blocked([job])[task.id]


def test_no_runner_then_awaiting_then_offline(queue: QueueService, clock: ManualClock) -> None:
    job = submit(queue, fleet="gpu")
    assert why(queue, job) == Blocked(
        Reason.NO_RUNNER,
        "0/0 runners serve fleet gpu; start one with `watchkeeper runner --fleet gpu`",
    )
    runner(queue, fleet="cpu")
    assert why(queue, job).message.startswith("0/1 runners serve fleet gpu;")
    runner(queue, fleet="gpu", org="acme")  # tied to another org: cannot ever lease it
    blocked = why(queue, job)
    assert blocked.code is Reason.NO_RUNNER and "fleet gpu for org free" in blocked.message
    runner(queue, fleet="gpu", capacity=3)
    assert why(queue, job) == Blocked(
        Reason.AWAITING_RUNNER,
        "1/1 runners serving fleet gpu have a free slot (3 slots free); "
        "waiting for one to pick it up",
    )
    clock.advance(7 * 60)
    assert why(queue, job) == Blocked(
        Reason.RUNNER_OFFLINE,
        "0/1 runners serving fleet gpu are online; 1 offline, last seen 7 min ago",
    )


def test_runners_busy(queue: QueueService) -> None:
    daemon = runner(queue, capacity=1)
    submit(queue)
    assert len(queue.lease(daemon.id, limit=5)) == 1
    waiting = submit(queue)
    assert why(queue, waiting) == Blocked(
        Reason.RUNNERS_BUSY,
        "0/1 runners serving fleet cpu have a free slot; 1 online run 1/1 tasks",
    )


def test_concurrency_cap_counts_jobs_not_tasks(queue: QueueService, clock: ManualClock) -> None:
    daemon = runner(queue, capacity=10)
    first, _second = submit(queue, org="acme"), submit(queue, org="acme")
    leases = queue.lease(daemon.id, limit=10)
    assert len(leases) == 2
    third = submit(queue, org="acme")
    assert why(queue, third) == Blocked(Reason.CONCURRENCY_CAP, "org acme runs 2/2 jobs")
    assert queue.lease(daemon.id, limit=10) == []  # the decision agrees with the reason
    other = submit(queue, org="free")
    assert why(queue, other).code is Reason.AWAITING_RUNNER
    assert [x.task.job_id for x in queue.lease(daemon.id, limit=10)] == [other.id]
    # A job already running does not start another by adding a continuation.
    lease = next(x for x in leases if x.task.job_id == first.id)
    queue.complete(lease.task.id, lease.token)
    assert why(queue, third).code is Reason.AWAITING_RUNNER


def test_compute_cap_counts_finished_and_running_minutes(
    queue: QueueService, clock: ManualClock
) -> None:
    daemon = runner(queue, capacity=10)
    submit(queue, org="acme", lease_s=86_400)
    [lease] = queue.lease(daemon.id)
    clock.advance(99 * 60)
    queue.heartbeat(daemon.id)
    waiting = submit(queue, org="acme")
    assert why(queue, waiting).code is Reason.AWAITING_RUNNER  # 99 of 100 minutes
    clock.advance(2 * 60)  # the running task's minutes count before it ends
    queue.heartbeat(daemon.id)
    queue.heartbeat(daemon.id)
    assert why(queue, waiting) == Blocked(
        Reason.COMPUTE_CAP, "org acme used 101/100 agent-minutes this month"
    )
    queue.complete(lease.task.id, lease.token)
    assert why(queue, waiting).code is Reason.COMPUTE_CAP  # spent minutes stay spent
    assert queue.lease(daemon.id) == []


class FakeLauncher:
    """Records cold starts; refuses with ``refusal`` when set."""

    def __init__(self, refusal: str | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.refusal = refusal

    def launch(self, org: str, fleet: str) -> None:
        self.calls.append((org, fleet))
        if self.refusal:
            raise LaunchRefused(self.refusal)


def test_provisioning_then_a_runner_registers(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    launcher = FakeLauncher()
    queue = make_service(tmp_path, store, clock, launchers={"acme": launcher})
    job = submit(queue, org="acme", fleet="gpu")
    assert why(queue, job).code is Reason.NO_RUNNER
    queue.sweep(clock.advance(1))
    assert launcher.calls == [("acme", "gpu")]
    clock.advance(40)
    assert why(queue, job) == Blocked(
        Reason.PROVISIONING,
        "a runner for org acme in fleet gpu is being started (cold start began 40 s ago)",
    )
    queue.sweep(clock())
    assert launcher.calls == [("acme", "gpu")]  # one cold start in flight, not two
    runner(queue, fleet="gpu")
    assert why(queue, job).code is Reason.AWAITING_RUNNER


def test_provision_failed_with_the_launchers_reason(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    command = (
        f"{sys.executable} -c \"import sys; print('quota exceeded', file=sys.stderr); sys.exit(4)\""
    )
    queue = make_service(
        tmp_path, store, clock, launchers={"acme": CommandLauncher(command, timeout_s=30)}
    )
    job = submit(queue, org="acme", fleet="gpu")
    [(org, fleet, reason)] = queue.sweep(clock()).provisioned
    assert (org, fleet, reason) == ("acme", "gpu", "launcher exited with status 4: quota exceeded")
    clock.advance(180)
    assert why(queue, job) == Blocked(
        Reason.PROVISION_FAILED,
        "the last cold start of a runner for org acme in fleet gpu failed 3 min ago: "
        "launcher exited with status 4: quota exceeded",
    )


def test_a_cold_start_that_never_registers_fails_by_timeout(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    launcher = FakeLauncher()
    queue = make_service(
        tmp_path,
        store,
        clock,
        launchers={"acme": launcher},
        queue={"provision_timeout_s": 120, "provision_retry_s": 60},
    )
    job = submit(queue, org="acme", fleet="gpu")
    queue.sweep(clock())
    clock.advance(121)
    blocked = why(queue, job)
    assert blocked.code is Reason.PROVISION_FAILED
    assert "no runner registered within 120 s of the cold start" in blocked.message
    queue.sweep(clock())  # failed a while ago: try again
    assert launcher.calls == [("acme", "gpu"), ("acme", "gpu")]


def test_an_explanation_that_fails_says_unknown_and_logs(
    queue: QueueService, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    job = submit(queue)

    def broken(*_args: object) -> None:
        raise RuntimeError("facts unavailable")

    monkeypatch.setattr(queue.store, "snapshot", broken)
    with caplog.at_level(logging.ERROR):
        blocked = why(queue, job)
    assert blocked.code is Reason.UNKNOWN and "facts unavailable" in blocked.message
    assert any(getattr(r, "action", None) == "queue_explain" for r in caplog.records)
