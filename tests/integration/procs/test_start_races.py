"""Races around a run's start: a launcher that dies or stalls never leaves a command unowned.

Each test plays the launcher's part by hand (record the run, start the real
shim on a socket, hand over the key) so it can die or stall exactly where a
real one might; the last one kills real launcher processes at varied moments.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from watchkeeper.procs import identity, layout, reaper
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import new_run_id
from watchkeeper.records.procs import NewProc, ProcRun, ProcStatus

from ...support.waiting import wait_for
from .conftest import gone


def record(engine: ProcEngine, argv: list[str], *, age_s: float = 0.0) -> tuple[ProcRun, str]:
    """Commit a detached run as ``starting``, ``age_s`` seconds old, and make its folder."""
    run_id = new_run_id()
    layout.run_dir(engine.data_dir, run_id).mkdir(parents=True)
    new = NewProc(
        run_id=run_id,
        name=argv[0],
        argv=tuple(argv),
        cwd=os.getcwd(),
        host=identity.host(),
        user=identity.user(),
        boot_id=identity.boot_id(),
        detach=True,
    )
    key = secrets.token_hex(32)
    created = engine.clock() - timedelta(seconds=age_s)
    run = engine.procs.register(
        new, created, engine_key=identity.engine_key(engine.data_dir), witness_key=key
    )
    return run, key


def spawn_shim(engine: ProcEngine, run: ProcRun) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """The real shim of ``run``, started as the launcher starts it (not yet handed its key)."""
    ours, theirs = socket.socketpair()
    folder = layout.run_dir(engine.data_dir, run.run_id)
    argv = [sys.executable, "-m", "watchkeeper.procs.shim", run.run_id, str(folder)]
    argv += [str(theirs.fileno()), "1", "0", "0", "--", *run.argv]
    shim = subprocess.Popen(
        argv, pass_fds=(theirs.fileno(),), start_new_session=True, stdin=subprocess.DEVNULL
    )
    theirs.close()
    return shim, ours


def hand_over(handshake: socket.socket, key: str) -> None:
    handshake.sendall(key.encode() + b"\n")
    handshake.shutdown(socket.SHUT_WR)


def settled(engine: ProcEngine, run_id: str) -> ProcRun | None:
    engine.reap()
    run = engine.get(run_id)
    return run if run.status.ended else None


def test_a_launcher_killed_after_handing_over_the_key_leaves_a_run_that_ends_well(
    engine: ProcEngine, tmp_path: Path
) -> None:
    marker, release = tmp_path / "ran", tmp_path / "release"
    script = f"touch {marker}; while [ ! -e {release} ]; do sleep 0.02; done"
    run, key = record(engine, ["sh", "-c", script])
    shim, handshake = spawn_shim(engine, run)
    hand_over(handshake, key)
    handshake.close()  # the launcher dies here, before it reads the shim's report
    shim.wait()  # detached: the first shim leaves at once; the second owns the run

    wait_for(marker.exists, what="the command to start")
    engine.reap()  # the engine adopts the owner the shim wrote down
    running = engine.get(run.run_id)
    assert running.status is ProcStatus.RUNNING
    assert identity.start_time(running.shim_pid or 0) == running.shim_start  # the shim lives on

    release.touch()
    ended = wait_for(lambda: settled(engine, run.run_id), what="the run to end")
    assert (ended.status, ended.exit_code) == (ProcStatus.SUCCEEDED, 0)


def test_a_launcher_stalled_past_the_grace_is_reclaimed_and_its_command_never_starts(
    engine: ProcEngine, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    run, key = record(engine, ["touch", str(marker)], age_s=reaper.START_GRACE_S + 1)
    engine.reap()  # the launcher is stalled: the engine takes the run as never started
    reclaimed = engine.get(run.run_id)
    assert reclaimed.status is ProcStatus.FAILED
    assert "never started" in (reclaimed.reason or "")

    shim, handshake = spawn_shim(engine, run)  # the launcher wakes up and goes on
    hand_over(handshake, key)
    with handshake, handshake.makefile("rb") as said:
        report = said.readline()
    shim.wait()
    assert b"not started" in report
    assert not marker.exists()
    assert engine.get(run.run_id).status is ProcStatus.FAILED


def test_a_launcher_gone_before_the_key_starts_nothing_and_the_run_says_why(
    engine: ProcEngine, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    run, _key = record(engine, ["touch", str(marker)])
    shim, handshake = spawn_shim(engine, run)
    handshake.close()  # the launcher dies before it hands over the witness key
    shim.wait()
    failed = wait_for(lambda: settled(engine, run.run_id), what="the run to be failed")
    assert failed.status is ProcStatus.FAILED
    assert "before handing over the run's witness key" in (failed.reason or "")
    assert not marker.exists()


LAUNCHER = """
import sys
from pathlib import Path
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.store import Store

ProcEngine(Store(sys.argv[1]), Path(sys.argv[2])).start(
    LaunchRequest(tuple(sys.argv[3:]), detach=True)
)
"""


def _recorded(engine: ProcEngine) -> list[ProcRun]:
    return engine.procs.runs(active_only=False)


def _file_of_the_run(engine: ProcEngine, name: str) -> object:
    def there() -> bool:
        return any(
            (layout.run_dir(engine.data_dir, run.run_id) / name).exists()
            for run in _recorded(engine)
        )

    return there


#: Moments a launcher can die at, each one the test can see: the record committed, the shim
#: holding the start claim, the shim's owner report written.
MOMENTS = {
    "recorded": lambda engine: lambda: bool(_recorded(engine)),
    "claimed": lambda engine: _file_of_the_run(engine, "start.json"),
    "reported": lambda engine: _file_of_the_run(engine, "owner.json"),
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_launcher_killed_at_any_moment_leaves_a_run_that_ran_once_or_never(
    engine: ProcEngine, tmp_path: Path, moment: str
) -> None:
    ran = tmp_path / "ran"
    command = ["sh", "-c", f"echo once >> {ran}"]
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, engine.store.url, str(engine.data_dir), *command]
    )
    wait_for(MOMENTS[moment](engine), what=f"the launcher to reach {moment!r}")
    launcher.kill()
    launcher.wait()
    (recorded,) = _recorded(engine)
    # An unclaimed run is reclaimed once its grace has passed: the engine's clock jumps there.
    later = recorded.created_at + timedelta(seconds=reaper.START_GRACE_S + 1)
    engine.clock = lambda: later

    ended = wait_for(lambda: settled(engine, recorded.run_id), what="the run to end")
    lines = ran.read_text().splitlines() if ran.exists() else []
    if ended.status is ProcStatus.SUCCEEDED:
        assert lines == ["once"]
    else:
        assert ended.status is ProcStatus.FAILED, ended
        assert lines == [], f"the command ran under a failed record: {ended.reason}"
        assert "never started" in (ended.reason or "")
    if moment == "reported":
        assert ended.status is ProcStatus.SUCCEEDED  # past the report, nothing can stop it
    for pid in (ended.shim_pid, ended.pid):
        if pid is not None:
            wait_for(lambda pid=pid: gone(pid), what="nothing of the run left")
