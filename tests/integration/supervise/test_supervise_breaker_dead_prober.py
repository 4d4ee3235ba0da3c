"""A probe whose process is gone has ended: with a shared file store it counts as failed.

A child process takes the half-open probe and is killed with SIGKILL while it
holds it; a breaker in this process must then record the probe as failed
instead of refusing every caller for good.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from watchkeeper.supervise import (
    BreakerState,
    CircuitBreaker,
    CircuitOpenError,
    CircuitState,
    FileStateStore,
    ManualClock,
)
from watchkeeper.supervise.breaker_state import Prober

RESET_S = 10.0

PROBER = textwrap.dedent(
    """
    import sys
    from watchkeeper.supervise import CircuitBreaker, FileStateStore, ManualClock

    breaker = CircuitBreaker("endpoint", fail_max=3, reset_timeout_s=10.0,
                             store=FileStateStore(sys.argv[1]), clock=ManualClock(100.0))

    def hold_probe():
        print("PROBE", flush=True)
        sys.stdin.readline()  # held until the test closes the pipe, or kills us

    breaker.call(hold_probe)
    print("DONE", flush=True)
    """
)


def opened_long_ago(store: FileStateStore) -> None:
    stored = store.compare_and_set(
        "endpoint", store.load("endpoint"), BreakerState(CircuitState.OPEN, 3, 0.0)
    )
    assert stored is not None


def rejection(breaker: CircuitBreaker) -> CircuitOpenError:
    with pytest.raises(CircuitOpenError) as caught:
        breaker.call(lambda: "never runs")
    return caught.value


def only_probe(breaker: CircuitBreaker) -> str:
    """Runs as the probe: while it runs, every other caller is refused."""
    assert rejection(breaker).state == "half_open"
    return "probed"


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_a_probe_whose_process_was_killed_counts_as_failed(tmp_path: Path, reaped: bool) -> None:
    store = FileStateStore(tmp_path / "breakers.json")
    opened_long_ago(store)
    child = subprocess.Popen(
        [sys.executable, "-c", PROBER, str(store.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "PROBE"
        clock = ManualClock(500.0)
        here = CircuitBreaker(
            "endpoint", fail_max=3, reset_timeout_s=RESET_S, store=store, clock=clock
        )
        # While the prober lives, it holds the probe.
        assert rejection(here).state == "half_open"

        os.kill(child.pid, signal.SIGKILL)
        if reaped:
            assert child.wait(timeout=30) == -signal.SIGKILL
        else:
            # Dead but not reaped: a zombie still has its pid and start time.
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)

        refused = rejection(here)
        assert refused.state == "open"
        assert refused.retry_at == 500.0 + RESET_S  # a reset timeout from when it was noticed
        after = store.load("endpoint")
        assert (after.state, after.failure_count, after.opened_at) == (CircuitState.OPEN, 3, 500.0)

        clock.advance(RESET_S)
        assert here.call(only_probe, here) == "probed"
        assert here.state is CircuitState.CLOSED
    finally:
        child.kill()
        child.communicate(timeout=30)


def test_a_probe_held_by_a_recycled_pid_counts_as_failed(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path / "breakers.json")
    me = psutil.Process()
    # Our own pid, but a process that started before us: the prober's pid was reused.
    holder = Prober(host=socket.gethostname(), pid=me.pid, started=me.create_time() - 3600.0)
    probing = BreakerState(CircuitState.HALF_OPEN, 3, 100.0, prober=holder)
    assert store.compare_and_set("endpoint", store.load("endpoint"), probing) is not None
    clock = ManualClock(500.0)
    here = CircuitBreaker("endpoint", fail_max=3, reset_timeout_s=RESET_S, store=store, clock=clock)

    refused = rejection(here)
    assert (refused.state, refused.retry_at) == ("open", 500.0 + RESET_S)
    clock.advance(RESET_S)
    assert here.call(only_probe, here) == "probed"


def test_a_probe_held_by_a_live_process_elsewhere_in_the_file_still_holds(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path / "breakers.json")
    parent = psutil.Process(os.getppid())
    holder = Prober(host=socket.gethostname(), pid=parent.pid, started=parent.create_time())
    probing = BreakerState(CircuitState.HALF_OPEN, 3, 100.0, prober=holder)
    assert store.compare_and_set("endpoint", store.load("endpoint"), probing) is not None
    here = CircuitBreaker("endpoint", reset_timeout_s=RESET_S, store=store, clock=ManualClock(1e6))

    assert rejection(here).state == "half_open"
    assert FileStateStore(store.path).load("endpoint").prober == holder


def test_a_probe_recorded_on_another_host_is_never_judged_from_here(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path / "breakers.json")
    holder = Prober(host=socket.gethostname() + "-elsewhere", pid=2**22 + 7, started=1.0)
    probing = BreakerState(CircuitState.HALF_OPEN, 3, 100.0, prober=holder)
    assert store.compare_and_set("endpoint", store.load("endpoint"), probing) is not None
    here = CircuitBreaker("endpoint", reset_timeout_s=RESET_S, store=store, clock=ManualClock(1e6))

    assert rejection(here).state == "half_open"


def test_a_state_file_written_before_probers_were_recorded_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "breakers.json"
    old = {"state": "half_open", "failure_count": 3, "opened_at": 100.0, "version": 4}
    path.write_text(json.dumps({"endpoint": old}), encoding="utf-8")
    store = FileStateStore(path)

    assert store.load("endpoint") == BreakerState(CircuitState.HALF_OPEN, 3, 100.0, 4)
    here = CircuitBreaker("endpoint", reset_timeout_s=RESET_S, store=store, clock=ManualClock(1e6))
    # Nobody is named as the prober: it holds, as before (a probe timeout would free it).
    assert rejection(here).state == "half_open"
