"""A command cannot end its own live run with a witness, even one it signed.

The run's folder and the store are both readable by the command's user. A
run's record therefore holds only the public half of an Ed25519 key pair: a
command that reads its key from the store and signs a witness with it (as the
shared HMAC key of older runs allowed) is not believed. And since a command
may still get hold of a signing key (an older run's shared key is in the
store; root may read its shim's memory), a witness is believed only once the
shim and the command it names have both exited, by pid and start time.
"""

from __future__ import annotations

import dataclasses
import secrets
import sys
from pathlib import Path

from sqlalchemy import update

from watchkeeper.procs import identity, launch, layout, witness
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.records.procs import ProcRun, ProcStatus
from watchkeeper.store.schema.procs import proc_runs

from ...support.waiting import wait_for
from .conftest import gone

# Reads its run's key from the store, signs a witness claiming success with it exactly as
# a shim signs with a shared key, and runs on until released.
STORE_READER = """
import hashlib, hmac, json, os, sys, time
from sqlalchemy import create_engine, text
url, procs, release = sys.argv[1:4]
run_id = os.environ["WATCHKEEPER_RUN_ID"]
engine = create_engine(url)
with engine.connect() as conn:
    key = conn.execute(
        text("SELECT witness_key FROM proc_runs WHERE run_id = :r"), {"r": run_id}
    ).scalar()
engine.dispose()
said = {"run_id": run_id, "exit_code": 0, "signal": None, "ended_at": time.time(), "error": None}
message = json.dumps([said[n] for n in ("run_id", "exit_code", "signal", "ended_at", "error")])
said["signature"] = hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()
folder = os.path.join(procs, run_id)
with open(os.path.join(folder, ".forged"), "w") as out:
    json.dump(said, out)
os.replace(os.path.join(folder, ".forged"), os.path.join(folder, "witness.json"))
while not os.path.exists(release):
    time.sleep(0.05)
sys.exit(3)
"""

# Holds its run's signing key (however it got it): signs a witness claiming success with
# the shim's own code, then, when told, kills its shim and runs on.
KEY_HOLDER = """
import os, signal, sys, time
from watchkeeper.procs import witness
key_file, procs, kill_shim = sys.argv[1:4]
run_id = os.environ["WATCHKEEPER_RUN_ID"]
while not os.path.exists(key_file):
    time.sleep(0.02)
with open(key_file) as file:
    key = file.read()
witness.write(os.path.join(procs, run_id), witness.Witness(run_id, 0, None, time.time()), key)
while not os.path.exists(kill_shim):
    time.sleep(0.02)
os.kill(os.getppid(), signal.SIGKILL)
while True:
    time.sleep(0.05)
"""


def _forged_while_running(engine: ProcEngine, run: ProcRun) -> None:
    wait_for(layout.witness_path(engine.data_dir, run.run_id).exists, what="the forged witness")
    assert identity.start_time(run.pid or 0) == run.pid_start  # the command runs on


def _start_store_reader(engine: ProcEngine, release: Path, *, key: str | None = None) -> ProcRun:
    """Start the store reader detached; with ``key``, as a run recorded with that shared key."""
    procs_dir = str(layout.procs_dir(engine.data_dir))
    argv = (sys.executable, "-c", STORE_READER, engine.store.url, procs_dir, str(release))
    request = LaunchRequest(argv=argv, detach=True)
    recorded = launch._record(engine.procs, engine.data_dir, request, engine.clock)
    if key is not None:
        # A run recorded before key pairs: the store holds the very key its shim signs with.
        with engine.store.engine.begin() as conn:
            conn.execute(
                update(proc_runs)
                .where(proc_runs.c.run_id == recorded.new.run_id)
                .values(witness_key=key)
            )
        recorded = dataclasses.replace(recorded, key=key)
    return launch._start_recorded(engine.procs, recorded, engine.clock).run


def test_a_witness_signed_with_the_key_in_the_store_does_not_end_a_live_run(
    engine: ProcEngine, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    run = _start_store_reader(engine, release)
    _forged_while_running(engine, run)

    engine.reap()
    still = engine.get(run.run_id)
    assert still.status is ProcStatus.RUNNING, (still.status, still.reason)
    assert "forged witness ignored" in (still.reason or "")
    assert engine.status(run.run_id)["effective_status"] == "running"
    stored = engine.procs.witness_key(run.run_id)
    assert stored is not None and stored.startswith(witness.ED25519)  # a public key only

    release.touch()
    ended = wait_for(lambda: (r := engine.refresh(run.run_id)).status.ended and r, what="the end")
    assert (ended.status, ended.exit_code) == (ProcStatus.FAILED, 3)


def test_a_command_holding_its_signing_key_still_cannot_end_its_live_run(
    engine: ProcEngine, tmp_path: Path
) -> None:
    key_file, kill_shim = tmp_path / "key", tmp_path / "kill-shim"
    procs_dir = str(layout.procs_dir(engine.data_dir))
    argv = (sys.executable, "-c", KEY_HOLDER, str(key_file), procs_dir, str(kill_shim))
    request = LaunchRequest(argv=argv, detach=True)
    recorded = launch._record(engine.procs, engine.data_dir, request, engine.clock)
    run = launch._start_recorded(engine.procs, recorded, engine.clock).run
    key_file.write_text(recorded.key)  # what root could read from the shim's memory
    _forged_while_running(engine, run)
    folder = layout.run_dir(engine.data_dir, run.run_id)
    stored = engine.procs.witness_key(run.run_id)
    assert witness.read(folder, run.run_id, stored) is not None  # the signature checks

    # Beside its live shim and command, a signed witness is not the last word.
    engine.reap()
    assert engine.get(run.run_id).status is ProcStatus.RUNNING
    assert engine.status(run.run_id)["effective_status"] == "running"

    # Its shim killed, the command running on: still not believed, and the run is reclaimed.
    kill_shim.touch()
    wait_for(lambda: gone(run.shim_pid or 0), what="the shim's death")
    assert not gone(run.pid or 0)
    engine.reap()
    ended = engine.get(run.run_id)
    assert (ended.status, ended.exit_code) == (ProcStatus.FAILED, None)
    assert "gone without a witness" in (ended.reason or "")
    assert "leftover processes were killed" in (ended.reason or "")
    wait_for(lambda: gone(run.pid or 0), what="the command's end")


def test_a_run_recorded_with_a_shared_key_settles_from_its_own_shims_witness(
    engine: ProcEngine, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    legacy = secrets.token_hex(32)  # as runs were keyed before key pairs
    run = _start_store_reader(engine, release, key=legacy)
    _forged_while_running(engine, run)
    folder = layout.run_dir(engine.data_dir, run.run_id)
    assert witness.read(folder, run.run_id, legacy) is not None  # forged, yet it checks

    engine.reap()
    assert engine.get(run.run_id).status is ProcStatus.RUNNING

    release.touch()
    ended = wait_for(lambda: (r := engine.refresh(run.run_id)).status.ended and r, what="the end")
    assert (ended.status, ended.exit_code) == (ProcStatus.FAILED, 3)
    said = witness.read(folder, run.run_id, legacy)
    assert said is not None and said.exit_code == 3  # the shim's own, signed with the old key
