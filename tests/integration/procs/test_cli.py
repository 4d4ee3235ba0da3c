"""The commands as a user types them: exit statuses, bad input, records that stay consistent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from watchkeeper.errors import InvalidInput
from watchkeeper.procs import layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.errors import LaunchFailed
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.records.procs import ProcStatus

WK = [sys.executable, "-m", "watchkeeper"]


def wk(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [*WK, "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.fixture
def config(engine: ProcEngine, tmp_path: Path) -> Path:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n')
    return file


def test_run_wait_status_and_logs(config: Path, engine: ProcEngine) -> None:
    foreground = wk(config, "run", "--", "sh", "-c", "echo out; exit 7")
    assert foreground.returncode == 7 and "out" in foreground.stdout
    started = wk(config, "run", "--detach", "--name", "quick", "--", "sh", "-c", "echo hi; exit 3")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    waited = wk(config, "wait", run_id)
    assert waited.returncode == 3, waited.stderr
    assert "exited with status 3" in waited.stdout
    assert wk(config, "logs", run_id).stdout == "hi\n"
    status = wk(config, "status", run_id)
    assert "failed" in status.stdout and "quick" in status.stdout
    listed = wk(config, "ps", "--all")
    assert run_id in listed.stdout
    assert "already_exited" in wk(config, "abort", run_id).stdout
    assert "reclaimed: none" in wk(config, "reclaim").stdout


def test_a_missing_command_or_unknown_run_is_a_clear_error(
    config: Path, engine: ProcEngine
) -> None:
    missing = wk(config, "run", "--", "no-such-command-here")
    assert missing.returncode == 1
    assert "error: command 'no-such-command-here' not found on PATH" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert engine.procs.runs(active_only=False) == []  # nothing recorded, nothing running
    unknown = wk(config, "abort", "p-unknown")
    assert unknown.returncode == 1 and "no process run 'p-unknown'" in unknown.stderr
    bad = wk(config, "run", "--timeout", "soon", "--", "true")
    assert bad.returncode == 1 and "write a duration like" in bad.stderr


def test_park_and_parked(config: Path, engine: ProcEngine) -> None:
    run_id = wk(config, "run", "--detach", "--", "true").stdout.strip()
    parked = wk(config, "park", "--session", "s-1", "--until", run_id, "--reason", "suite")
    assert parked.returncode == 0, parked.stderr
    shown = wk(config, "parked")
    assert "s-1" in shown.stdout and run_id in shown.stdout


def test_a_missing_working_folder_is_refused(engine: ProcEngine, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        engine.start(LaunchRequest(("true",), cwd=str(tmp_path / "nowhere")))
    assert engine.procs.runs(active_only=False) == []


def test_an_unwritable_data_folder_is_refused(engine: ProcEngine, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    broken = ProcEngine(engine.store, blocker / "data")
    with pytest.raises(LaunchFailed, match="choose a writable data_dir"):
        broken.start(LaunchRequest(("true",)))
    assert engine.procs.runs(active_only=False) == []


def test_a_corrupt_witness_fails_the_run_with_the_reason(engine: ProcEngine) -> None:
    launched = engine.start(LaunchRequest(("true",)), tee=False)
    assert launched.shim is not None
    launched.shim.wait()  # the shim is gone; nobody has read its witness yet
    layout.witness_path(engine.data_dir, launched.run.run_id).write_bytes(b'{"run_id": "p-')
    engine.reap()
    done = engine.get(launched.run.run_id)
    assert done.status is ProcStatus.FAILED and done.exit_code is None
    assert done.reason is not None and "witness is unreadable" in done.reason
