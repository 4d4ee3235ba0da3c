"""Programs run by a real ProgramHost: real processes (small Python programs the tests write),
real signals, a real store, and one ManualClock as both the app's and the supervisors' clock,
so backoff, start_s and intensity move only when a test moves them."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.programs import view
from watchkeeper.programs.host import ProgramHost
from watchkeeper.store import Store
from watchkeeper.store.runs import PushRun

from ...conftest import T0
from ...support.waiting import wait_for_async

HOST = "testhost"

#: Written at the top of every test program: ``mark(name)`` appends a line to a shared
#: file (``MARKS``), so a test reads what each start and each stop did, in order.
PRELUDE = """
import os, signal, sys, time
MARKS = os.environ.get("MARKS", "")
def mark(text):
    if MARKS:
        with open(MARKS, "a") as f:
            f.write(f"{text} {os.getpid()}\\n")
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sqlite_store(sqlite_template: Path, tmp_path: Path) -> Iterator[Store]:
    """A store on a fresh SQLite file (programs write push runs, tested on both elsewhere)."""
    target = tmp_path / "data" / "watchkeeper.db"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(sqlite_template, target)
    opened = Store(f"sqlite:///{target}")
    yield opened
    opened.close()


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    """A Python program written to ``tmp_path`` and the command that runs it."""
    path = tmp_path / f"{name}.py"
    path.write_text(PRELUDE + textwrap.dedent(body))
    return [sys.executable, str(path)]


def settings_for(tmp_path: Path, store: Store, **tables: Any) -> config.Settings:
    """Settings with the given ``programs``, ``groups`` and ``host_checks`` tables."""
    raw: dict[str, Any] = {"data_dir": str(tmp_path / "data"), "database_url": store.url}
    raw.update(tables)
    return config.parse(raw, "test settings", base_dir=tmp_path)


@asynccontextmanager
async def running(
    tmp_path: Path, store: Store, clock: ManualClock | None = None, **tables: Any
) -> AsyncIterator[ProgramHost]:
    """A started host of the given programs; stopped (and nothing of it left) at the end."""
    settings = settings_for(tmp_path, store, **tables)
    clock = clock or ManualClock(T0)
    host = ProgramHost(settings, store, clock, supervision_clock=clock, host=HOST)
    await host.start()
    try:
        yield host
    finally:
        await host.stop()


def program(host: ProgramHost, name: str) -> dict[str, Any]:
    """One program as the API shows it."""
    return view.program(host, name)


async def wait_state(host: ProgramHost, name: str, *states: str) -> dict[str, Any]:
    """Wait until program ``name`` is in one of ``states`` and every event its supervisors
    published so far is handled; its view then.

    The state is read from the supervisor as it is now, while the history, the log and the
    run record follow its events a moment later: a view read on the state alone can miss
    the history's last moment.
    """
    for _ in range(100):  # a state that keeps flipping fails the test rather than spinning
        await wait_for_async(
            lambda: program(host, name)["state"] in states, what=f"{name} {' or '.join(states)}"
        )
        for group in list(host.groups.values()):
            await group.settled()
        shown = program(host, name)
        if shown["state"] in states:
            return shown
    raise AssertionError(f"{name} never stayed {' or '.join(states)} while its events settled")


async def wait_run_ended(store: Store, name: str) -> PushRun:
    """Wait until program ``name``'s run is recorded as ended (the record is written after
    the program's state changes); the run then."""
    found = await wait_for_async(
        lambda: (run := store.runs.get("program", f"{name}@{HOST}")).status.ended and run,
        what=f"{name}'s run ended",
    )
    assert isinstance(found, PushRun)
    return found


def marks(path: Path) -> list[tuple[str, int]]:
    """The marks written so far: (text, pid)."""
    if not path.exists():
        return []
    lines = [line.rsplit(" ", 1) for line in path.read_text().splitlines()]
    return [(text, int(pid)) for text, pid in lines]


async def wait_marks(path: Path, count: int) -> list[tuple[str, int]]:
    """Wait until at least ``count`` marks were written."""
    found = await wait_for_async(
        lambda: len(got := marks(path)) >= count and got, what=f"{count} marks in {path}"
    )
    assert isinstance(found, list)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill(pid: int, signum: int = signal.SIGKILL) -> None:
    """Send ``signum`` to ``pid`` (already gone is fine)."""
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return
