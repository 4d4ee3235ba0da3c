"""A run's whole process tree ends with it, even a grandchild that left the group with setsid.

Supervisors and shells start helpers in sessions of their own; a group signal
never reaches them. The shim keeps every descendant under itself and ends
what is left when the command's leader exits, so nothing of a finished or
aborted run runs on.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from watchkeeper.procs import containment, identity, layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.records.procs import AbortOutcome, ProcStatus

from ...support.waiting import wait_for
from .conftest import start_detached, wait_witness

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="containment of a tree needs Linux"
)

# Forks a child that leaves the command's group and session (setsid), writes its pid and
# session to argv[1] and sleeps (ignoring SIGTERM when argv[2] ends with "stubborn"); the
# leader then sleeps too, or exits 0 at once when argv[2] starts with "exit".
ESCAPER = (
    "import os, signal, sys, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if sys.argv[2].endswith('stubborn'):\n"
    "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "    tmp = sys.argv[1] + '.tmp'\n"
    "    with open(tmp, 'w') as f:\n"
    "        f.write(f'{os.getpid()} {os.getsid(0)}')\n"
    "    os.replace(tmp, sys.argv[1])\n"
    "    time.sleep(300)\n"
    "    os._exit(0)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.01)\n"
    "if sys.argv[2].startswith('exit'):\n"
    "    os._exit(0)\n"
    "time.sleep(300)\n"
)


def runs_nothing(pid: int) -> bool:
    """The process is gone, or a zombie that runs nothing."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def escaped(tmp_path: Path) -> Iterator[Path]:
    """Where the escaping grandchild writes its pid; it is killed after the test if it lives."""
    pid_file = tmp_path / "grandchild.pid"
    yield pid_file
    if pid_file.exists():
        pid = int(pid_file.read_text().split()[0])
        started = identity.start_time(pid)
        if started is not None and psutil.Process(pid).cmdline()[:2] == [sys.executable, "-c"]:
            os.kill(pid, signal.SIGKILL)


def grandchild_of(pid_file: Path) -> int:
    """The escaped grandchild's pid, once it has written it (it was running then)."""
    wait_for(pid_file.exists, what="the grandchild's pid file")
    pid, session = (int(word) for word in pid_file.read_text().split())
    assert session == pid  # it had left the command's session and group
    return pid


def test_abort_ends_a_grandchild_that_left_the_group(engine: ProcEngine, escaped: Path) -> None:
    run = start_detached(engine, sys.executable, "-c", ESCAPER, str(escaped), "sleep")
    grandchild = grandchild_of(escaped)
    assert not runs_nothing(grandchild)
    result = engine.abort(run.run_id, grace_s=2.0)
    assert result.outcome is AbortOutcome.SIGNALED
    assert result.run.status is ProcStatus.CANCELLED
    wait_for(lambda: runs_nothing(grandchild), what=f"the escaped grandchild {grandchild} ended")
    shown = engine.status(run.run_id)
    assert shown["containment"] == "subreaper"
    assert [ended["pid"] for ended in shown["ended_descendants"]] == [grandchild]


def test_a_leader_that_exits_leaves_no_grandchild_running(
    engine: ProcEngine, escaped: Path
) -> None:
    run = start_detached(engine, sys.executable, "-c", ESCAPER, str(escaped), "exit")
    grandchild = grandchild_of(escaped)
    wait_witness(engine, run)
    # The shim ends what is left before it writes the witness: no waiting here.
    assert runs_nothing(grandchild)
    settled = engine.refresh(run.run_id)
    assert settled.status is ProcStatus.SUCCEEDED  # the command itself did succeed
    shown = engine.status(run.run_id)
    assert shown["containment"] == "subreaper"
    ended = shown["ended_descendants"]
    assert [entry["pid"] for entry in ended] == [grandchild]
    assert ended[0]["signal"] == "SIGTERM"


def test_a_running_run_shows_its_containment(engine: ProcEngine, escaped: Path) -> None:
    run = start_detached(engine, sys.executable, "-c", ESCAPER, str(escaped), "sleep")
    grandchild_of(escaped)
    shown = engine.status(run.run_id)
    assert shown["containment"] == "subreaper"
    assert shown["ended_descendants"] == []
    engine.abort(run.run_id, grace_s=2.0)


def test_a_foreground_run_is_not_held_open_by_a_grandchild_on_its_output(
    engine: ProcEngine, escaped: Path
) -> None:
    # The grandchild shares the output pipe the shim copies to the terminal and the log:
    # the pipe would not close while it lived, and the shim would wait on it for ever.
    request = LaunchRequest(argv=(sys.executable, "-c", ESCAPER, str(escaped), "exit"))
    launched = engine.start(request, tee=True)
    assert launched.shim is not None
    try:
        grandchild = grandchild_of(escaped)
        wait_for(lambda: launched.shim.poll() is not None, what="the foreground shim's exit")
        assert launched.shim.returncode == 0
        assert runs_nothing(grandchild)
        shown = engine.status(launched.run.run_id)
        assert [entry["pid"] for entry in shown["ended_descendants"]] == [grandchild]
    finally:
        if launched.shim.poll() is None:
            launched.shim.kill()
            launched.shim.wait()


def test_a_grandchild_that_ignores_sigterm_is_killed(engine: ProcEngine, escaped: Path) -> None:
    run = start_detached(engine, sys.executable, "-c", ESCAPER, str(escaped), "exit-stubborn")
    grandchild = grandchild_of(escaped)
    wait_witness(engine, run)
    assert runs_nothing(grandchild)
    ended = engine.status(run.run_id)["ended_descendants"]
    assert [(entry["pid"], entry["signal"]) for entry in ended] == [(grandchild, "SIGKILL")]


def test_a_containment_record_the_shim_did_not_sign_is_not_shown(
    engine: ProcEngine, escaped: Path
) -> None:
    run = start_detached(engine, sys.executable, "-c", ESCAPER, str(escaped), "sleep")
    grandchild_of(escaped)
    # The run's folder is the command's to write: anybody could claim what was ended.
    forged = {"run_id": run.run_id, "containment": "cgroup", "ended": [{"pid": 1}]}
    folder = layout.run_dir(engine.data_dir, run.run_id)
    (folder / containment.CONTAINMENT_NAME).write_text(json.dumps(forged))
    shown = engine.status(run.run_id)
    assert shown["containment"] == "subreaper"
    assert shown["ended_descendants"] == []
    engine.abort(run.run_id, grace_s=2.0)
    shown = engine.status(run.run_id)
    assert [entry["pid"] for entry in shown["ended_descendants"]] != [1]
    assert shown["containment"] == "subreaper"
