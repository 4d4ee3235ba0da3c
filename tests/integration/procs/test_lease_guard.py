"""A leased run's shim ends the command itself when its launcher stops renewing.

A runner frozen by SIGSTOP cannot stop its task's command before the lease
lapses; the shim, which is not frozen, can. These tests play the runner's part
through ``Launched.lease``; the runner's own test is in
``tests/integration/queue/test_runner_frozen.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import Launched, LaunchRequest
from watchkeeper.records.procs import ProcStatus

# Sleeps until released, or ends by itself after ``seconds`` with status 0.
SLEEPER = (
    "import os, sys, time\n"
    "end = time.monotonic() + float(sys.argv[2])\n"
    "while not os.path.exists(sys.argv[1]) and time.monotonic() < end:\n"
    "    time.sleep(0.02)\n"
)


def start(
    engine: ProcEngine, release: Path, seconds: float, lease: tuple[float, float]
) -> Launched:
    argv = (sys.executable, "-c", SLEEPER, str(release), str(seconds))
    return engine.start(LaunchRequest(argv, die_with_parent=True, lease=lease))


def test_a_lease_nobody_renews_ends_the_command_with_the_reason(
    engine: ProcEngine, tmp_path: Path
) -> None:
    launched = start(engine, tmp_path / "never", 600.0, lease=(0.3, 0.5))
    assert launched.shim is not None and launched.lease is not None
    launched.shim.wait()
    ended = engine.refresh(launched.run.run_id)
    assert ended.status is ProcStatus.FAILED
    assert ended.signal == 15  # SIGTERM: the sleeper had no handler, so it died of it
    assert "its lease ran out before the runner renewed it" in (ended.reason or "")
    launched.lease.close()


def test_a_renewed_lease_lets_the_command_finish(engine: ProcEngine, tmp_path: Path) -> None:
    launched = start(engine, tmp_path / "never", 1.5, lease=(0.5, 0.5))
    assert launched.shim is not None and launched.lease is not None
    assert launched.lease.renew(60.0, 0.5)  # well past the command's own second
    launched.shim.wait()
    ended = engine.refresh(launched.run.run_id)
    assert (ended.status, ended.exit_code, ended.reason) == (ProcStatus.SUCCEEDED, 0, None)
    launched.lease.close()


def test_a_closed_lease_line_ends_the_watch_not_the_command(
    engine: ProcEngine, tmp_path: Path
) -> None:
    launched = start(engine, tmp_path / "never", 1.5, lease=(0.5, 0.5))
    assert launched.shim is not None and launched.lease is not None
    launched.lease.close()  # the runner is done renewing (its task was reported)
    assert launched.lease.renew(1.0, 0.5) is False
    launched.shim.wait()  # the command outlives its first deadline and ends by itself
    ended = engine.refresh(launched.run.run_id)
    assert (ended.status, ended.exit_code, ended.reason) == (ProcStatus.SUCCEEDED, 0, None)
