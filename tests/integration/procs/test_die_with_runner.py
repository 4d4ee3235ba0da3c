"""A task's processes die with the runner that started them; a detached run outlives its caller.

A runner killed mid-task cannot report, so the server leases the task again
and another runner runs it anew: had the first run's command lived on, the task
would run twice. A detached ``watchkeeper run`` is the opposite promise: it
outlives the session that started it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.cli import WK, cli_env
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.errors import InvalidInput
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.procs.signals import group_alive
from watchkeeper.store import Store

from .. import queue_daemons as daemons
from ..queue_daemons import QUICK, queue_server, server_env

EVENT_TIMEOUT_S = 60.0
# Starts a child in its own group, says both pids, then waits for a release file and only
# then writes "finished": a command that lives on past its runner finishes once released.
TASK = (
    "import os, subprocess, sys, time\n"
    "folder = sys.argv[1]\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "with open(os.path.join(folder, 'started.tmp'), 'w') as f:\n"
    "    f.write(f'{os.getpid()} {child.pid}')\n"
    "os.replace(os.path.join(folder, 'started.tmp'), os.path.join(folder, 'started'))\n"
    "while not os.path.exists(os.path.join(folder, 'release')):\n"
    "    time.sleep(0.05)\n"
    "child.kill()\n"
    "open(os.path.join(folder, 'finished'), 'w').write('done')\n"
)


def runs_nothing(pid: int) -> bool:
    """The process is gone, or a zombie that runs nothing."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def started_pids(folder: Path) -> tuple[int, int]:
    """The command's pid and its child's, once the command has said them."""
    wait_for((folder / "started").exists, what="the command to start", timeout=EVENT_TIMEOUT_S)
    command, child = (folder / "started").read_text().split()
    return int(command), int(child)


def kill_if_left(folder: Path) -> None:
    """Let a command that outlived its test finish, and end its child: leave nothing behind."""
    (folder / "release").touch()
    if (folder / "started").exists():
        for pid in map(int, (folder / "started").read_text().split()):
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store) as live:
        yield live


def start_runner(server: LiveServer, data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    return daemons.start_runner(
        "gpu", data_dir, log, "--capacity", "1", *QUICK, env=server_env(server), command=WK
    )


def test_a_killed_runner_takes_its_task_processes_with_it(
    server: LiveServer, tmp_path: Path
) -> None:
    folder = tmp_path / "task"
    folder.mkdir()
    runner_dir = tmp_path / "runner"
    daemon = start_runner(server, runner_dir, tmp_path / "runner.log")
    try:
        with Client(server.url, server.tokens["admin"]) as client:
            client.jobs.submit(
                "long", org="o", fleet="gpu", argv=[sys.executable, "-c", TASK, str(folder)]
            )
            command, child = started_pids(folder)
            pgid = os.getpgid(command)
            daemon.kill()
            daemon.wait()
            wait_for(lambda: runs_nothing(command), what="the command to die with its runner")
            wait_for(lambda: runs_nothing(child), what="the command's child to die too")
            wait_for(lambda: not group_alive(pgid), what="the command's group to be empty")
        [witness] = wait_for(
            lambda: list((runner_dir / "procs").glob("*/witness.json")), what="the witness"
        )
        said = json.loads(witness.read_text())
        assert said["signal"] == signal.SIGTERM and said["exit_code"] is None
        why = f"the process that started it (pid {daemon.pid}) went away"
        assert said["error"] == f"{why}: killed by signal 15 (SIGTERM)"
        (folder / "release").touch()  # a command still alive would finish now; none is
        assert not (folder / "finished").exists()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        kill_if_left(folder)


def test_a_detached_run_outlives_the_session_that_started_it(
    engine: ProcEngine, tmp_path: Path
) -> None:
    folder = tmp_path / "task"
    folder.mkdir()
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n')
    # A session that starts the run, then lingers until it is killed whole.
    session = subprocess.Popen(
        [
            "sh",
            "-c",
            '"$@" && exec sleep 600',
            "sh",
            *WK,
            "--config",
            str(config),
            "run",
            "--detach",
            "--",
            sys.executable,
            "-c",
            TASK,
            str(folder),
        ],
        env=cli_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )
    try:
        command, child = started_pids(folder)
        os.killpg(session.pid, signal.SIGKILL)
        session.wait()
        assert not runs_nothing(command) and not runs_nothing(child)
        (folder / "release").touch()
        wait_for((folder / "finished").exists, what="the detached command to finish")
        [run] = engine.procs.runs(active_only=False)
        wait_for(lambda: engine.refresh(run.run_id).status.ended, what="the detached run to end")
        assert engine.get(run.run_id).exit_code == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(session.pid, signal.SIGKILL)
        kill_if_left(folder)


def test_a_shim_whose_parent_is_already_gone_starts_nothing(tmp_path: Path) -> None:
    # The parent can die before the shim asks to be told of it; the kernel would never say.
    gone_parent = subprocess.Popen(["true"])
    gone_parent.wait()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    marker = tmp_path / "ran"
    read_fd, write_fd = os.pipe()
    shim = subprocess.run(
        [
            sys.executable,
            "-m",
            "watchkeeper.procs.shim",
            "p-orphan",
            str(run_dir),
            str(write_fd),
            "0",
            "0",
            str(gone_parent.pid),
            "--",
            "touch",
            str(marker),
        ],
        pass_fds=(write_fd,),
        check=False,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as handshake:
        report = json.loads(handshake.readline())
    assert shim.returncode == 125
    assert "went away before the command started" in report["error"]
    said = json.loads((run_dir / "witness.json").read_text())
    assert said["exit_code"] == 125 and said["error"] == report["error"]
    assert not marker.exists()


def test_a_run_cannot_both_detach_and_die_with_its_parent(engine: ProcEngine) -> None:
    with pytest.raises(InvalidInput, match="choose one"):
        engine.start(LaunchRequest(("true",), detach=True, die_with_parent=True))
    assert engine.procs.runs(active_only=False) == []
