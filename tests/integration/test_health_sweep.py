"""``/healthz`` judges the sweeps by the clock: a sweep that hangs turns the server degraded,
then failing (503, so an orchestrator restarts it), and healthy again once sweeps succeed.

The server is real (HTTP on loopback, its loops running, a real database); its clock is a
:class:`ManualClock`, so the test moves time instead of waiting for it. The sweep hangs the
way a store call that never returns would: a sweep hook blocks its worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support import patient_http
from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import make_settings
from ..support.cli import wk
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for

#: Sweeps every 4 s; every kind reads within 10 s (the default): late past 2 x 4 + 10 = 18 s
#: without a good sweep, failing past 3 x 4 + 10 = 22 s.
INTERVAL_S = 4


class HungSweep:
    """A sweep hook that, once armed, holds the sweep in its thread until released."""

    def __init__(self) -> None:
        self.armed = False
        self.entered = threading.Event()
        self.released = threading.Event()

    def __call__(self, _now: datetime) -> None:
        if self.armed:
            self.entered.set()
            self.released.wait(timeout=120)


@pytest.fixture
def runtime(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[Runtime]:
    settings = make_settings(tmp_path, store.url, check_interval_s=INTERVAL_S)
    opened = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    yield opened
    opened.sweeper.close()


def _health(server: LiveServer) -> tuple[int, dict[str, Any]]:
    answer = patient_http.get(server.url + "/healthz")
    body: dict[str, Any] = answer.json()
    return answer.status_code, body


def _advance(runtime: Runtime, clock: ManualClock, seconds: float) -> None:
    """Move time on, then wait for the lease loop's next tick to renew the lease at the new
    time, as it does every half interval: only the sweep is then behind."""
    clock.advance(seconds)
    wait_for(
        lambda: runtime.leadership.reached_at == clock(), what="the lease renewed at the new time"
    )


def test_a_hung_sweep_turns_health_degraded_then_failing_then_ok(
    runtime: Runtime, clock: ManualClock, tmp_path: Path
) -> None:
    hung = HungSweep()
    runtime.sweeper.sweep_hooks.append(hung)
    with live_server(runtime, run_sweeper=True) as server:
        wait_for(lambda: runtime.sweeper.health.last_ok_at is not None, what="the first sweep")
        code, body = _health(server)
        assert (code, body["status"], body["causes"]) == (200, "ok", [])

        hung.armed = True
        clock.advance(INTERVAL_S)  # the next sweep falls due, and hangs
        wait_for(hung.entered.is_set, what="a sweep hanging")
        try:
            _advance(runtime, clock, 16)  # 20 s since the last good sweep
            code, body = _health(server)
            assert code == 200, body
            assert body["status"] == "degraded"
            assert body["causes"] == [
                {
                    "check": "sweep",
                    "status": "degraded",
                    "detail": f"no sweep has succeeded for 20 s (interval {INTERVAL_S} s)",
                }
            ]

            _advance(runtime, clock, 75)  # 95 s
            code, body = _health(server)
            assert code == 503, body
            assert body["status"] == "failing"
            assert body["causes"] == [
                {
                    "check": "sweep",
                    "status": "failing",
                    "detail": f"no sweep has succeeded for 95 s (interval {INTERVAL_S} s)",
                }
            ]
            doctor = wk(
                "doctor", "--server", server.url, "--token", server.tokens["admin"], cwd=tmp_path
            )
            assert doctor.returncode == 1, doctor.stdout + doctor.stderr
            assert "no sweep has succeeded for 95 s" in doctor.stdout
            assert "Traceback" not in doctor.stdout + doctor.stderr
        finally:
            hung.armed = False
            hung.released.set()
        # The hung sweep ends; the next one is overdue, so it follows at once.
        wait_for(lambda: _health(server)[1]["status"] == "ok", what="health ok again")
        assert runtime.sweeper.health.last_ok_at == clock()
