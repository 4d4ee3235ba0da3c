"""Health that acts: while a disk-low check fails, the programs it names do not start or restart,
and say why; running ones go on; they start once it clears. The disk is real: a file in
/dev/shm (a tmpfs) takes the free space below the check's limit and gives it back."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.errors import Conflict
from watchkeeper.programs import view
from watchkeeper.store import Store

from ...conftest import T0
from ...support.waiting import wait_for_async
from .conftest import kill, marks, running, script, wait_marks, wait_state

pytestmark = pytest.mark.anyio

SHM = Path("/dev/shm")
FILL_MB = 64
UP = """
mark("start " + sys.argv[1])
time.sleep(300)
"""


@pytest.fixture
def filler() -> Iterator[Path]:
    if not SHM.is_dir():
        pytest.skip("needs a tmpfs at /dev/shm")
    path = SHM / f"watchkeeper-test-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


def fill(path: Path) -> None:
    with path.open("wb") as file:
        for _ in range(FILL_MB):
            file.write(b"\1" * 2**20)


async def test_a_low_disk_pauses_the_starts_it_names_until_it_clears(
    tmp_path: Path, sqlite_store: Store, filler: Path
) -> None:
    clock = ManualClock(T0)
    # Half the filler below today's free space: passes now, fails once the filler is written.
    limit = shutil.disk_usage(SHM).free / 2**20 - FILL_MB / 2
    command = script(tmp_path, "up", UP)
    env = {"MARKS": str(tmp_path / "marks")}
    programs = {
        name: {
            "command": [*command, name],
            "start_s": 0,
            "environment": env,
            "backoff": {"initial_s": 0, "jitter": 0},
        }
        for name in ("crawler", "api")
    }
    checks = {
        "shm": {
            "kind": "disk",
            "path": str(SHM),
            "min_free_mb": limit,
            "interval_s": 5,
            "pauses": ["crawler"],
        }
    }
    async with running(
        tmp_path, sqlite_store, clock, programs=programs, host_checks=checks
    ) as host:
        await wait_state(host, "crawler", "running")
        fill(filler)
        clock.advance(5)
        closed = await wait_for_async(lambda: view.status(host)["host_checks"][0]["pausing"])
        assert closed and (await wait_state(host, "crawler", "running"))  # running goes on
        crawler = dict(await wait_marks(tmp_path / "marks", 2))["start crawler"]
        kill(crawler)
        paused = await wait_state(host, "crawler", "paused")
        with pytest.raises(Conflict, match="crawler cannot start now: paused by host check shm"):
            await host.start_program("crawler")
        kill(dict(marks(tmp_path / "marks"))["start api"])
        await wait_marks(tmp_path / "marks", 3)  # api is not named: it restarts
        filler.unlink()
        clock.advance(5)
        await wait_marks(tmp_path / "marks", 4)
        shown = await wait_state(host, "crawler", "running")
        log = (tmp_path / "data" / "programs" / "crawler" / "output.log").read_text()
    assert paused["paused"].startswith("paused by host check shm: ")
    assert "GiB free on /dev/shm" in paused["paused"]
    assert paused["pid"] is None
    assert [m["event"] for m in shown["history"]][-3:] == ["restarting", "paused", "started"]
    assert "start paused: paused by host check shm" in log
