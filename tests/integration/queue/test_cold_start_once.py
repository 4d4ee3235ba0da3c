"""Two replicas sweeping at once cold-start each fleet's runner once, never twice.

Both replicas read the same facts (queued work, no runner) before either
writes; only the one whose conditional write on the provision row wins may
launch. Both databases; the replicas are two services on two engines.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.queue.conftest import make_service, submit
from watchkeeper.clock import ManualClock
from watchkeeper.queue.launcher import LaunchRefused
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Snapshot
from watchkeeper.store import Store

FLEETS = [f"fleet-{i}" for i in range(16)]
WAIT_S = 60


class Recorder:
    """Records every launch of every replica; refuses while ``refusal`` is set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.refusal: str | None = None
        self._lock = threading.Lock()

    def launch(self, org: str, fleet: str) -> None:
        with self._lock:
            self.calls.append((org, fleet))
        if self.refusal:
            raise LaunchRefused(self.refusal)


@pytest.fixture
def replicas(
    tmp_path: Path, store: Store, clock: ManualClock
) -> Iterator[tuple[list[QueueService], Recorder]]:
    recorder = Recorder()
    stores = [Store(store.url, migrate=False) for _ in range(2)]
    queue = {"provision_timeout_s": 300, "provision_retry_s": 60}
    services = [
        make_service(tmp_path, opened, clock, launchers={"acme": recorder}, queue=queue)
        for opened in stores
    ]
    try:
        yield services, recorder
    finally:
        for opened in stores:
            opened.close()


def _sweep_together(services: list[QueueService], clock: ManualClock) -> None:
    """Both sweeps decide on what they read, and neither writes before both have read."""
    read = threading.Barrier(len(services), timeout=WAIT_S)
    finished: list[QueueService] = []

    def hold_after_reading(service: QueueService) -> None:
        real = service.store.snapshot

        def snapshot(*args: Any) -> Snapshot:
            facts = real(*args)
            read.wait()
            return facts

        service.store.snapshot = snapshot  # type: ignore[method-assign]

    def sweep(service: QueueService) -> None:
        try:
            service.sweep(clock())
        except BaseException:
            read.abort()  # a failed sweep must not leave the other one waiting
            raise
        # Never aborted after a sweep that went through: the other one may have been
        # released by the barrier and not yet woken, and would find it broken.
        finished.append(service)

    for service in services:
        hold_after_reading(service)
    threads = [threading.Thread(target=sweep, args=(s,)) for s in services]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT_S)
    for service in services:
        del service.store.snapshot  # back to the real read
    assert not any(thread.is_alive() for thread in threads)
    assert len(finished) == len(services)  # a failed sweep is reported by its thread


def test_two_replicas_cold_start_each_fleet_once(
    replicas: tuple[list[QueueService], Recorder], clock: ManualClock
) -> None:
    services, recorder = replicas
    for fleet in FLEETS:
        submit(services[0], org="acme", fleet=fleet)
    _sweep_together(services, clock)
    launched = Counter(fleet for _org, fleet in recorder.calls)
    assert launched == Counter(FLEETS)  # every fleet once: none missed, none twice
    provisions = services[1].store.provisions()
    assert sorted(p.fleet for p in provisions) == sorted(FLEETS)
    assert {p.state for p in provisions} == {"provisioning"}


def test_two_replicas_retry_a_failed_cold_start_once(
    replicas: tuple[list[QueueService], Recorder], clock: ManualClock
) -> None:
    services, recorder = replicas
    for fleet in FLEETS:
        submit(services[0], org="acme", fleet=fleet)
    recorder.refusal = "quota exceeded"
    services[0].sweep(clock())
    assert {p.state for p in services[0].store.provisions()} == {"failed"}
    recorder.refusal = None
    recorder.calls.clear()
    clock.advance(61)  # past the retry wait: both replicas see a cold start to retry
    _sweep_together(services, clock)
    launched = Counter(fleet for _org, fleet in recorder.calls)
    assert launched == Counter(FLEETS)
    assert {p.state for p in services[1].store.provisions()} == {"provisioning"}
