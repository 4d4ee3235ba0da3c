"""Group strategies in start order, as OTP's: one_for_one restarts the program that died,
one_for_all every program of the group, rest_for_one it and those listed after it. The
programs are real processes; one is SIGKILLed."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.store import Store

from ...conftest import T0
from .conftest import kill, running, script, wait_marks, wait_state

pytestmark = pytest.mark.anyio

UP = """
mark("start " + sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: (mark("stop " + sys.argv[1]), sys.exit(0)))
time.sleep(300)
"""


def group(tmp_path: Path, strategy: str) -> dict[str, object]:
    command = script(tmp_path, "up", UP)
    marks = str(tmp_path / "marks")
    programs = {
        name: {
            "command": [*command, name],
            "group": "crawl",
            "start_s": 1,
            "environment": {"MARKS": marks},
        }
        for name in ("db", "crawler", "indexer")
    }
    groups = {"crawl": {"strategy": strategy, "backoff": {"initial_s": 0, "jitter": 0}}}
    return {"programs": programs, "groups": groups}


@pytest.mark.parametrize(
    ("strategy", "stopped", "started_again"),
    [
        ("one_for_one", [], ["crawler"]),
        ("one_for_all", ["indexer", "db"], ["db", "crawler", "indexer"]),
        ("rest_for_one", ["indexer"], ["crawler", "indexer"]),
    ],
)
async def test_a_killed_program_takes_down_and_brings_back_what_its_strategy_says(
    tmp_path: Path, sqlite_store: Store, strategy: str, stopped: list[str], started_again: list[str]
) -> None:
    clock = ManualClock(T0)
    marks = tmp_path / "marks"
    async with running(tmp_path, sqlite_store, clock, **group(tmp_path, strategy)) as host:
        for count in (1, 2, 3):  # each starts once the one before has run start_s
            first = await wait_marks(marks, count)
            clock.advance(1)
        assert [text for text, _ in first] == ["start db", "start crawler", "start indexer"]
        crawler = dict(first)["start crawler"]
        kill(crawler)
        after = await wait_marks(marks, 3 + len(stopped))
        for count in range(len(started_again)):
            after = await wait_marks(marks, 3 + len(stopped) + count + 1)
            clock.advance(1)
        for name in ("db", "crawler", "indexer"):
            await wait_state(host, name, "running")
    moves = [text for text, _ in after[3:]]
    # Stopped in reverse start order, then started again in start order.
    assert moves == [f"stop {n}" for n in stopped] + [f"start {n}" for n in started_again]
