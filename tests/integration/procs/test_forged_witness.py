"""Only the shim's witness counts: one the command writes for itself settles nothing."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from watchkeeper.config import KindConfig
from watchkeeper.contract import RunStatus
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.process import ProcessAdapter
from watchkeeper.procs import identity, layout, witness
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import ParkState, ProcRun, ProcStatus
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.waiting import wait_for
from .conftest import gone, start_detached, wait_witness

# Writes a witness in the shim's format claiming success, then runs on until released.
FORGER = """
printf '{"run_id": "%s", "exit_code": 0, "signal": null, "ended_at": 1.0, "error": null}' \
    "$WATCHKEEPER_RUN_ID" > "$PROCS/$WATCHKEEPER_RUN_ID/witness.json"
while [ ! -e "$RELEASE" ]; do sleep 0.05; done
exit 3
"""


def start_forger(engine: ProcEngine, release: Path) -> ProcRun:
    env = {**os.environ, "PROCS": str(layout.procs_dir(engine.data_dir)), "RELEASE": str(release)}
    run = start_detached(engine, "sh", "-c", FORGER, env=env)
    wait_for(layout.witness_path(engine.data_dir, run.run_id).exists, what="the forged witness")
    return run


def test_a_witness_the_command_writes_is_ignored_until_the_shim_writes_its_own(
    engine: ProcEngine, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    run = start_forger(engine, release)
    engine.park("agent-1", "waiting on the forger", run.run_id)
    forged = json.loads(layout.witness_path(engine.data_dir, run.run_id).read_text())
    assert forged["exit_code"] == 0  # the command really did claim success

    engine.reap()
    swept = engine.sweep(engine.clock())
    still = engine.get(run.run_id)
    assert still.status is ProcStatus.RUNNING
    assert swept.wakes == []
    assert [view.park.state for view in engine.parked()] == [ParkState.WAITING]
    body = engine.status(run.run_id)
    assert body["effective_status"] == "running"
    assert "forged witness ignored" in (body["reason"] or "")
    assert identity.start_time(still.pid or 0) == still.pid_start  # the command runs on

    release.touch()
    ended = wait_for(lambda: (r := engine.refresh(run.run_id)).status.ended and r, what="the end")
    assert (ended.status, ended.exit_code) == (ProcStatus.FAILED, 3)
    engine.sweep(engine.clock())
    assert [view.park.state for view in engine.parked()] == [ParkState.WOKEN]


def test_a_forged_witness_left_by_a_dead_shim_does_not_make_the_run_succeed(
    engine: ProcEngine, tmp_path: Path
) -> None:
    run = start_forger(engine, tmp_path / "never")
    os.kill(run.shim_pid or 0, signal.SIGKILL)
    wait_for(lambda: gone(run.shim_pid or 0), what="the shim's end")

    engine.reap()
    ended = engine.get(run.run_id)
    assert ended.status is ProcStatus.FAILED
    assert ended.exit_code is None
    assert "gone without a witness" in (ended.reason or "")
    wait_for(lambda: gone(run.pid or 0), what="the command's end: the engine kills leftovers")


def read_model_status(store: Store, tmp_path: Path, run_id: str, engine: ProcEngine) -> RunStatus:
    settings = make_settings(tmp_path, store.url)
    assert settings.data_dir.absolute() == engine.data_dir.absolute()
    kind = ProcessAdapter("process", KindConfig(adapter="process"), AdapterContext(settings, store))
    [found] = [view for view in kind.read(engine.clock()) if view.run_id == run_id]
    return found.status


def test_the_read_model_does_not_take_a_forged_witness(
    engine: ProcEngine, store: Store, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    run = start_forger(engine, release)
    assert read_model_status(store, tmp_path, run.run_id, engine) is RunStatus.RUNNING
    release.touch()
    wait_for(lambda: engine.refresh(run.run_id).status.ended, what="the end")
    assert read_model_status(store, tmp_path, run.run_id, engine) is RunStatus.FAILED


def test_the_shims_witness_is_signed_with_a_key_the_command_cannot_see(
    engine: ProcEngine, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    script = 'env > "$SEEN"; tr "\\0" " " < /proc/$PPID/cmdline >> "$SEEN"; exit 4'
    run = start_detached(engine, "sh", "-c", script, env={**os.environ, "SEEN": str(seen)})
    wait_witness(engine, run)
    key = engine.procs.witness_key(run.run_id)
    assert key
    folder = layout.run_dir(engine.data_dir, run.run_id)
    looked_at = [seen.read_text(), *(path.read_text() for path in folder.iterdir())]
    assert "WATCHKEEPER_RUN_ID" in looked_at[0] and "procs.shim" in looked_at[0]  # it looked
    assert [text for text in looked_at if key in text] == []
    assert witness.read(folder, run.run_id, key) is not None
    with pytest.raises(witness.WitnessForged):
        witness.read(folder, run.run_id, "another key")
    said = json.loads(layout.witness_path(engine.data_dir, run.run_id).read_text())
    said["exit_code"] = 0  # a signed witness edited to claim success
    layout.witness_path(engine.data_dir, run.run_id).write_text(json.dumps(said))
    with pytest.raises(witness.WitnessForged):
        witness.read(folder, run.run_id, key)
