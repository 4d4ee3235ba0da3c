"""Fixtures for the job queue: a service on the test store with a manual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_settings
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Job, NewRunner, Runner
from watchkeeper.store import Store

ORGS = {
    "acme": {"max_concurrent_jobs": 2, "monthly_agent_minutes": 100},
    "free": {},
}


def make_service(
    tmp_path: Path, store: Store, clock: ManualClock, **overrides: Any
) -> QueueService:
    """A queue service with short leases and the test orgs."""
    raw: dict[str, Any] = {
        "orgs": ORGS,
        "queue": {"lease_s": 60, "max_attempts": 2, "runner_offline_after_s": 30},
    }
    raw.update(overrides)
    launchers = raw.pop("launchers", {})
    settings = make_settings(tmp_path, store.url, **raw)
    return QueueService(store, settings, clock=clock, launchers=launchers)


@pytest.fixture
def queue(tmp_path: Path, store: Store, clock: ManualClock) -> QueueService:
    """A queue service on the test store."""
    return make_service(tmp_path, store, clock)


def runner(queue: QueueService, fleet: str = "cpu", capacity: int = 2, **more: Any) -> Runner:
    """Register a runner of ``fleet``."""
    return queue.register(NewRunner(fleet, capacity, "host-a", 4242, **more))


def submit(
    queue: QueueService, org: str = "free", fleet: str = "cpu", title: str = "job", **more: Any
) -> Job:
    """Submit a job running ``true``."""
    return queue.submit(
        title, org=org, fleet=fleet, payload={"argv": ["true"]}, submitted_by="test", **more
    )
