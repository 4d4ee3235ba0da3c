"""The runner schedules its polls on the clock it is given, never on the host's."""

from __future__ import annotations

from typing import Any, cast

from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.queue.runner import RunnerDaemon, RunnerOptions


class _Runners:
    def __init__(self) -> None:
        self.leases = 0

    def lease_answer(self, runner_id: str, free: int) -> dict[str, Any]:
        self.leases += 1
        return {"tasks": [], "reason": None}


class _Client:
    url = "http://127.0.0.1:9"

    def __init__(self) -> None:
        self.runners = _Runners()


def test_an_idle_runner_polls_once_per_poll_interval_of_its_clock() -> None:
    clock = ManualClock()
    client = _Client()
    daemon = RunnerDaemon(
        cast(Client, client), RunnerOptions("cpu", poll_s=2.0), cast(ProcEngine, None), clock
    )
    daemon.runner_id = "r-1"
    daemon.step()
    daemon.step()
    assert client.runners.leases == 1
    clock.advance(1.9)
    daemon.step()
    assert client.runners.leases == 1
    clock.advance(0.1)
    daemon.step()
    assert client.runners.leases == 2
