"""Fixtures for process runs: an engine on the test store, and nothing left running after."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import utcnow
from watchkeeper.procs import identity, layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.records.procs import ProcRun
from watchkeeper.store import Store

from ...support.waiting import wait_for


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts: it runs nothing)."""
    return identity.start_time(pid) is None


def kill_leftovers(engine: ProcEngine) -> None:
    """End every group a test left running, by its verified leader."""
    for run in engine.procs.runs(active_only=True):
        if run.pid is not None and run.pid_start == identity.start_time(run.pid):
            os.killpg(run.pgid or run.pid, signal.SIGKILL)
        if run.shim_pid is not None and run.shim_start == identity.start_time(run.shim_pid):
            os.kill(run.shim_pid, signal.SIGKILL)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The data folder of the test's runs."""
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def engine(store: Store, data_dir: Path) -> Iterator[ProcEngine]:
    """A process engine with a real clock and a short abort grace."""
    opened = ProcEngine(store, data_dir, clock=utcnow, grace_s=2.0)
    yield opened
    kill_leftovers(opened)


def start_detached(engine: ProcEngine, *argv: str, **options: object) -> ProcRun:
    """Start ``argv`` detached and return its run."""
    request = LaunchRequest(argv=tuple(argv), detach=True, **options)  # type: ignore[arg-type]
    return engine.start(request).run


def wait_witness(engine: ProcEngine, run: ProcRun) -> None:
    """Wait until the shim has written the run's witness and exited: then it is believed."""
    path = layout.witness_path(engine.data_dir, run.run_id)
    wait_for(path.exists, what=f"the witness of {run.run_id}")
    shim = run.shim_pid or engine.get(run.run_id).shim_pid
    if shim is not None:
        wait_for(lambda: gone(shim), what=f"the shim of {run.run_id} to exit")
