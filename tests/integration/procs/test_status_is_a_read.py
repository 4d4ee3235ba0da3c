"""Looking at a run changes nothing: settling a stale run is the sweep's (or ``reclaim``'s) job.

The run here is stale for real: its shim is killed, so no witness will come,
and the command it started is left running in its group. ``status`` (the
command on a real data folder, and the engine's read behind it and the API)
must leave the record, the hook and that leftover process exactly as they were.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import HookState, ProcRun, ProcStatus

from ...support.cli import wk
from ...support.waiting import wait_for
from .conftest import gone, start_detached


@pytest.fixture
def config(engine: ProcEngine, tmp_path: Path) -> Path:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n')
    return file


def _stale_run(engine: ProcEngine, fired_file: Path) -> ProcRun:
    """A run whose shim died without a witness while its command lives on."""
    run = start_detached(engine, "sleep", "120", on_done_cmd=f"echo fired >> {fired_file}")
    assert run.shim_pid is not None and run.pid is not None
    os.kill(run.shim_pid, signal.SIGKILL)
    wait_for(lambda: gone(run.shim_pid or 0), what="the shim to die")
    return engine.get(run.run_id)


def _untouched(engine: ProcEngine, before: ProcRun, fired_file: Path) -> None:
    assert engine.get(before.run_id).as_dict() == before.as_dict()
    assert not fired_file.exists()
    assert before.pid is not None and not gone(before.pid)


def _settled_by_reclaim(engine: ProcEngine, run: ProcRun, fired_file: Path) -> None:
    done = engine.get(run.run_id)
    assert done.status is ProcStatus.FAILED
    assert done.reason is not None and "gone without a witness" in done.reason
    wait_for(lambda: gone(run.pid or 0), what="the leftover command to be killed")
    assert engine.get(run.run_id).hook_state is HookState.FIRED
    assert fired_file.read_text() == "fired\n"


def test_the_status_command_reads_a_stale_run_without_settling_it(
    engine: ProcEngine, config: Path, tmp_path: Path
) -> None:
    fired_file = tmp_path / "fired"
    before = _stale_run(engine, fired_file)
    # The run's own store, read here: a look at it through a server is the API's test.
    local = ("--store", engine.store.url)
    shown = wk("--config", str(config), "status", before.run_id, *local)
    assert shown.returncode == 0, shown.stderr
    assert "stale" in shown.stdout and "running" in shown.stdout
    _untouched(engine, before, fired_file)
    reclaimed = wk("--config", str(config), "reclaim", *local)
    assert f"reclaimed: {before.run_id}" in reclaimed.stdout, reclaimed.stderr
    _settled_by_reclaim(engine, before, fired_file)


def test_the_engine_s_read_of_a_run_changes_nothing_and_the_sweep_settles_it(
    engine: ProcEngine, tmp_path: Path
) -> None:
    fired_file = tmp_path / "fired"
    before = _stale_run(engine, fired_file)
    body = engine.status(before.run_id)
    assert (body["status"], body["effective_status"], body["alive"]) == ("running", "stale", False)
    _untouched(engine, before, fired_file)
    report = engine.sweep(engine.clock())
    assert report.reaped.reclaimed == [before.run_id]
    _settled_by_reclaim(engine, before, fired_file)
