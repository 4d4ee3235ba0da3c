"""Stopping programs: the stop signal, the stop timeout, a whole group in reverse start order,
and the process containment `run` has (nothing a program started outlives it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.contract import RunStatus
from watchkeeper.store import Store

from ...conftest import T0
from ...support.waiting import wait_for_async
from .conftest import alive, marks, running, script, wait_marks, wait_run_ended, wait_state

pytestmark = pytest.mark.anyio

POLITE = """
mark("start " + sys.argv[1])
def on(signum, _frame):
    mark(f"got {signal.Signals(signum).name} " + sys.argv[1])
    sys.exit(0)
signal.signal(signal.SIGTERM, on)
signal.signal(signal.SIGINT, on)
time.sleep(300)
"""
STUBBORN = """
signal.signal(signal.SIGTERM, lambda *_: mark("ignored SIGTERM"))
mark("start")
time.sleep(300)
"""
# Leaves a grandchild in a session of its own (setsid), as daemons do, then waits (or exits
# at once with argv[1] == "exit"): a group signal never reaches the grandchild.
ESCAPER = """
if os.fork() == 0:
    os.setsid()
    mark("escaped")
    time.sleep(300)
    os._exit(0)
mark("start")
if sys.argv[1] == "exit":
    time.sleep(0.5)
    sys.exit(0)
time.sleep(300)
"""


def env(tmp_path: Path) -> dict[str, str]:
    return {"MARKS": str(tmp_path / "marks")}


@pytest.mark.parametrize("contain", ["tree", "group"])
async def test_stop_sends_the_stop_signal_configured(
    tmp_path: Path, sqlite_store: Store, contain: str
) -> None:
    programs = {
        "worker": {
            "command": [*script(tmp_path, "polite", POLITE), "worker"],
            "stop_signal": "INT",
            "start_s": 0,
            "contain": contain,
            "environment": env(tmp_path),
        }
    }
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        await wait_marks(tmp_path / "marks", 1)
        answer = await host.stop_program("worker")
        shown = await wait_state(host, "worker", "stopped")
        run = await wait_run_ended(sqlite_store, "worker")
    assert answer.startswith("worker stopped")
    assert [text for text, _ in marks(tmp_path / "marks")] == ["start worker", "got SIGINT worker"]
    assert shown["wanted"] is False
    assert (run.status, run.step) == (RunStatus.CANCELLED, "stopped by request")


async def test_a_program_that_ignores_its_stop_signal_is_killed_after_the_stop_timeout(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {
        "stubborn": {
            "command": script(tmp_path, "stubborn", STUBBORN),
            "start_s": 0,
            "stop_timeout_s": 0.5,
            "environment": env(tmp_path),
        }
    }
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        (_, pid), *_ = await wait_marks(tmp_path / "marks", 1)
        await host.stop_program("stubborn")
        await wait_state(host, "stubborn", "stopped")
        log = (tmp_path / "data" / "programs" / "stubborn" / "output.log").read_text()
    assert not alive(pid)
    assert [text for text, _ in marks(tmp_path / "marks")] == ["start", "ignored SIGTERM"]
    assert "still running 0.5 s after its stop signal: sending SIGKILL" in log


async def test_a_group_stops_as_a_whole_in_reverse_start_order(
    tmp_path: Path, sqlite_store: Store
) -> None:
    clock = ManualClock(T0)
    command = script(tmp_path, "polite", POLITE)
    programs = {
        name: {
            "command": [*command, name],
            "group": "crawl",
            "start_s": 1,
            "environment": env(tmp_path),
        }
        for name in ("db", "crawler", "indexer")
    }
    async with running(
        tmp_path, sqlite_store, clock, programs=programs, groups={"crawl": {}}
    ) as host:
        for count in (1, 2, 3):
            await wait_marks(tmp_path / "marks", count)
            clock.advance(1)
        assert await host.stop_program("crawl") == "group crawl stopped"
        for name in ("db", "crawler", "indexer"):
            await wait_state(host, name, "stopped")
        group = host.groups["crawl"]
    stops = [text for text, _ in marks(tmp_path / "marks")][3:]
    assert stops == ["got SIGTERM indexer", "got SIGTERM crawler", "got SIGTERM db"]
    assert group.state == "stopped"


async def test_a_grandchild_in_a_session_of_its_own_is_ended_with_its_program(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {
        "daemon": {
            "command": [*script(tmp_path, "escaper", ESCAPER), "stay"],
            "start_s": 0,
            "environment": env(tmp_path),
        }
    }
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        found = dict(await wait_marks(tmp_path / "marks", 2))
        await host.stop_program("daemon")
        await wait_state(host, "daemon", "stopped")
        await wait_for_async(lambda: not alive(found["escaped"]), what="the grandchild ended")
    assert not alive(found["start"])


async def test_what_a_program_left_behind_when_it_exited_is_ended_before_it_restarts(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {
        "daemon": {
            "command": [*script(tmp_path, "escaper", ESCAPER), "exit"],
            "start_s": 0,
            "restart": "transient",
            "environment": env(tmp_path),
        }
    }
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        found = dict(await wait_marks(tmp_path / "marks", 2))
        await wait_state(host, "daemon", "exited")
        log = (tmp_path / "data" / "programs" / "daemon" / "output.log").read_text()
    assert not alive(found["escaped"])
    assert f"ended what it left running: {found['escaped']} (python" in log
