"""Real processes: register before start, detached survival, the witness on every kind of end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from watchkeeper.procs import identity, layout, witness
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.records.procs import ProcStatus

from ...support.waiting import wait_for
from .conftest import gone, start_detached, wait_witness


def test_a_detached_run_survives_the_death_of_the_group_that_started_it(
    engine: ProcEngine, tmp_path: Path
) -> None:
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n')
    id_file = tmp_path / "run-id"
    script = (
        f"{sys.executable} -m watchkeeper --config {config} run --detach -- sleep 120 > {id_file}"
        "; sleep 120"
    )
    # The caller runs in a group of its own, the way a time limit on a job would see it.
    caller = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    try:
        wait_for(lambda: id_file.exists() and id_file.read_text().strip())
        os.killpg(caller.pid, signal.SIGKILL)
        caller.wait()
    finally:
        if caller.poll() is None:
            os.killpg(caller.pid, signal.SIGKILL)
            caller.wait()
    run = engine.get(id_file.read_text().strip())
    assert run.status is ProcStatus.RUNNING
    assert run.pid is not None and run.pgid == run.pid
    assert os.getsid(run.pid) != os.getsid(0)  # a session of its own (setsid)
    assert engine.alive(run) is True
    assert engine.effective_status(run) == "running"
    assert engine.abort(run.run_id).outcome.value == "signaled"


def test_the_record_is_committed_before_the_command_starts(engine: ProcEngine) -> None:
    run = start_detached(engine, "sh", "-c", 'echo "$WATCHKEEPER_RUN_ID"; exit 0')
    wait_witness(engine, run)
    done = engine.refresh(run.run_id)
    assert done.status is ProcStatus.SUCCEEDED
    assert done.created_at <= (done.started_at or done.created_at)
    assert layout.log_path(engine.data_dir, run.run_id).read_text().strip() == run.run_id
    assert done.argv == ("sh", "-c", 'echo "$WATCHKEEPER_RUN_ID"; exit 0')
    assert done.host == identity.host() and done.boot_id == identity.boot_id()


def test_the_witness_is_written_on_exit(engine: ProcEngine) -> None:
    run = start_detached(engine, "sh", "-c", "echo failing >&2; exit 3")
    wait_witness(engine, run)
    found = witness.read(layout.run_dir(engine.data_dir, run.run_id), run.run_id)
    assert found is not None and (found.exit_code, found.signal) == (3, None)
    done = engine.refresh(run.run_id)
    assert (done.status, done.exit_code, done.reason) == (
        ProcStatus.FAILED,
        3,
        "exited with status 3",
    )
    assert "failing" in layout.log_path(engine.data_dir, run.run_id).read_text()


def test_the_witness_is_written_when_the_command_dies_by_a_signal(engine: ProcEngine) -> None:
    run = start_detached(engine, "sleep", "120")
    assert run.pid is not None
    os.kill(run.pid, signal.SIGKILL)  # not through abort: nobody asked watchkeeper
    wait_witness(engine, run)
    done = engine.refresh(run.run_id)
    assert (done.status, done.exit_code, done.signal) == (ProcStatus.FAILED, None, 9)
    assert done.reason == "killed by signal 9 (SIGKILL)"


def test_a_killed_shim_leaves_no_witness_and_the_run_is_stale(engine: ProcEngine) -> None:
    run = start_detached(engine, "sleep", "120")
    assert run.shim_pid is not None and run.pid is not None
    os.kill(run.shim_pid, signal.SIGKILL)
    wait_for(lambda: gone(run.shim_pid or 0))
    assert not witness.exists(layout.run_dir(engine.data_dir, run.run_id))
    assert engine.effective_status(engine.get(run.run_id)) == "stale"
    assert engine.alive(engine.get(run.run_id)) is False
    report = engine.reap()
    assert report.reclaimed == [run.run_id]
    done = engine.get(run.run_id)
    assert done.status is ProcStatus.FAILED and done.exit_code is None
    assert done.reason is not None and "gone without a witness" in done.reason
    # The engine owns what it started: the orphaned command did not outlive its shim.
    wait_for(lambda: gone(run.pid or 0))


def test_a_foreground_run_returns_the_command_s_status(engine: ProcEngine) -> None:
    launched = engine.start(LaunchRequest(("sh", "-c", "exit 5")), tee=False)
    done = engine.finish_foreground(launched)
    assert (done.status, done.exit_code) == (ProcStatus.FAILED, 5)
