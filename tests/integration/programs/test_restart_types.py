"""Restart types as OTP has them: permanent always, transient after an abnormal exit, temporary
never; ``exit_codes`` say which statuses are normal. Each program is a real process."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.contract import RunStatus
from watchkeeper.store import Store

from .conftest import running, script, wait_marks, wait_run_ended, wait_state

pytestmark = pytest.mark.anyio

#: Exits at once with the status in argv[1] the first time, then stays up.
ONCE = """
mark("start")
first = not os.path.exists(sys.argv[2])
open(sys.argv[2], "a").close()
if first:
    sys.exit(int(sys.argv[1]))
time.sleep(300)
"""


def table(tmp_path: Path, restart: str, status: int, **more: object) -> dict[str, object]:
    command = [*script(tmp_path, "once", ONCE), str(status), str(tmp_path / "ran")]
    return {
        "command": command,
        "restart": restart,
        "start_s": 0,
        "environment": {"MARKS": str(tmp_path / "marks")},
        "backoff": {"initial_s": 0, "jitter": 0},
        **more,
    }


@pytest.mark.parametrize("status", [0, 1])
async def test_a_permanent_program_is_restarted_whatever_its_exit(
    tmp_path: Path, sqlite_store: Store, status: int
) -> None:
    programs = {"worker": table(tmp_path, "permanent", status)}
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        started = await wait_marks(tmp_path / "marks", 2)
        shown = await wait_state(host, "worker", "running")
    assert started[0][1] != started[1][1]  # a new process
    assert shown["restarts"] == 1
    reason = "normal" if status == 0 else "error"
    assert shown["last_exit"].startswith(reason)


async def test_a_transient_program_is_restarted_after_an_abnormal_exit(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {"worker": table(tmp_path, "transient", 2)}
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        await wait_marks(tmp_path / "marks", 2)
        shown = await wait_state(host, "worker", "running")
    assert shown["restarts"] == 1
    assert shown["last_exit"] == "error: exit status 2"


async def test_a_transient_program_that_exits_normally_stays_down_and_its_run_succeeds(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {"worker": table(tmp_path, "transient", 0)}
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        shown = await wait_state(host, "worker", "exited")
        run = await wait_run_ended(sqlite_store, "worker")
    assert shown["restarts"] == 0
    assert run.status is RunStatus.SUCCEEDED
    assert [m["event"] for m in shown["history"]] == ["started", "exited"]


async def test_exit_codes_name_the_statuses_that_are_a_normal_exit(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {"worker": table(tmp_path, "transient", 3, exit_codes=[0, 3])}
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        shown = await wait_state(host, "worker", "exited")
    assert shown["last_exit"] == "normal: exit status 3"


async def test_a_temporary_program_is_never_restarted_and_its_failure_is_recorded(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {"worker": table(tmp_path, "temporary", 4)}
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        shown = await wait_state(host, "worker", "failed")
        run = await wait_run_ended(sqlite_store, "worker")
    assert shown["restarts"] == 0
    assert run.status is RunStatus.FAILED
    assert run.failure_reason == "exited: error: exit status 4"
