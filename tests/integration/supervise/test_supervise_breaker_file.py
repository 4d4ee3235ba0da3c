"""FileStateStore shared by real processes: one circuit, one probe, across processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from watchkeeper.supervise import (
    BreakerState,
    CircuitBreaker,
    CircuitOpenError,
    CircuitState,
    FileStateStore,
)

WORKER = textwrap.dedent(
    """
    import os, sys, time
    from watchkeeper.supervise import CircuitBreaker, CircuitOpenError, FileStateStore

    store_path, mode, release = sys.argv[1], sys.argv[2], sys.argv[3]
    breaker = CircuitBreaker("endpoint", fail_max=3, reset_timeout_s=3600,
                             store=FileStateStore(store_path))

    def boom():
        raise ConnectionError("down")

    def hold_probe():
        print("PROBE", flush=True)
        while not os.path.exists(release):  # held until the test lets go
            time.sleep(0.01)
        return "ok"

    if mode == "fail":
        for _ in range(3):
            try:
                breaker.call(boom)
            except ConnectionError:
                pass
        print(breaker.state.value, flush=True)
    else:
        try:
            breaker.call(hold_probe)
            print("CLOSED-BY-PROBE", flush=True)
        except CircuitOpenError as exc:
            print("REJECTED", exc.state, flush=True)
    """
)


def spawn(store: Path, mode: str, release: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(store), mode, str(release)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_circuit_opened_in_one_process_rejects_calls_in_another(tmp_path: Path) -> None:
    store_path = tmp_path / "breakers.json"
    worker = spawn(store_path, "fail", tmp_path / "unused")
    out, _ = worker.communicate(timeout=30)
    assert out.strip() == "open"
    here = CircuitBreaker("endpoint", fail_max=3, store=FileStateStore(store_path))
    with pytest.raises(CircuitOpenError, match="'endpoint' is open"):
        here.call(lambda: "never runs")


def test_only_one_process_gets_the_probe(tmp_path: Path) -> None:
    store_path = tmp_path / "breakers.json"
    release = tmp_path / "release"
    store = FileStateStore(store_path)
    # Opened an hour and a bit ago: the reset timeout has passed, a probe is due.
    long_ago = time.time() - 3700
    assert store.compare_and_set(
        "endpoint", store.load("endpoint"), BreakerState(CircuitState.OPEN, 3, long_ago)
    )
    workers = [spawn(store_path, "probe", release) for _ in range(4)]
    first_lines = {}
    for w in workers:
        assert w.stdout is not None
        first_lines[w] = w.stdout.readline().strip()
    probes = [w for w, line in first_lines.items() if line == "PROBE"]
    rejected = [line for line in first_lines.values() if line.startswith("REJECTED")]
    assert len(probes) == 1
    assert rejected == ["REJECTED half_open"] * 3
    release.touch()
    out, _ = probes[0].communicate(timeout=30)
    assert out.strip() == "CLOSED-BY-PROBE"
    for w in workers:
        w.communicate(timeout=30)  # reaps it and closes its pipe
    assert store.load("endpoint").state is CircuitState.CLOSED
