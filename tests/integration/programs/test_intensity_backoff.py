"""Backoff between restarts, start_s, and the intensity past which a group gives up (a crash
loop): real processes, restart delays on the test's clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.contract import RunStatus
from watchkeeper.programs import view
from watchkeeper.programs.records import CRASH_LOOP
from watchkeeper.store import Store

from ...conftest import T0
from ...support.waiting import wait_for_async
from .conftest import HOST, marks, running, script, wait_marks, wait_state

pytestmark = pytest.mark.anyio

CRASH = """
mark("start")
sys.exit(1)
"""
UP = """
mark("start " + sys.argv[1])
time.sleep(300)
"""


def crashing(tmp_path: Path, **more: object) -> dict[str, object]:
    return {
        "command": script(tmp_path, "crash", CRASH),
        "start_s": 0,
        "environment": {"MARKS": str(tmp_path / "marks")},
        **more,
    }


async def test_restarts_wait_out_a_growing_backoff_on_the_clock(
    tmp_path: Path, sqlite_store: Store
) -> None:
    clock = ManualClock(T0)
    backoff = {"initial_s": 1, "factor": 2, "max_s": 30, "jitter": 0}
    programs = {
        "crasher": crashing(tmp_path, backoff=backoff, intensity={"restarts": 10, "within_s": 60})
    }
    async with running(tmp_path, sqlite_store, clock, programs=programs) as host:
        for expected in (1.0, 2.0, 4.0):
            shown = await wait_state(host, "crasher", "restarting")
            assert shown["backoff"]["restart_in_s"] == expected
            started = len(marks(tmp_path / "marks"))
            clock.advance(expected - 0.001)
            assert len(marks(tmp_path / "marks")) == started
            assert (await wait_state(host, "crasher", "restarting"))["backoff"]["restart_in_s"] > 0
            clock.advance(0.001)
            await wait_marks(tmp_path / "marks", started + 1)
    assert shown["restarts"] == 3


async def test_a_crash_loop_past_the_intensity_gives_up_and_fails_the_run(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {
        "crasher": crashing(tmp_path, group="crawl"),
        "steady": {
            "command": [*script(tmp_path, "up", UP), "steady"],
            "group": "crawl",
            "start_s": 0,
            "environment": {"MARKS": str(tmp_path / "marks")},
        },
    }
    groups = {"crawl": {"intensity": {"restarts": 2, "within_s": 60}, "backoff": {"initial_s": 0}}}
    async with running(tmp_path, sqlite_store, programs=programs, groups=groups) as host:
        shown = await wait_state(host, "crasher", "gave_up")
        steady = await wait_state(host, "steady", "gave_up")
        group = view.status(host)["groups"][0]
        steady_run = await wait_for_async(
            lambda: (
                (run := sqlite_store.runs.get("program", f"steady@{HOST}")).status.ended and run
            ),
            what="steady's run ended",
        )
        crash_run = sqlite_store.runs.get("program", f"crasher@{HOST}")
    assert [text for text, _ in marks(tmp_path / "marks")].count("start") == 3  # 1 + 2 restarts
    assert group["state"] == "gave_up" and group["crash_loop"] == "crasher"
    assert crash_run.status is RunStatus.FAILED
    assert crash_run.failure_fingerprint == CRASH_LOOP
    assert crash_run.failure_reason == (
        "crash loop: more than 2 restarts within 60 s; last exit error: exit status 1"
    )
    assert steady_run.status is RunStatus.CANCELLED
    assert steady_run.step == "stopped: its group crawl gave up after crasher's crash loop"
    assert shown["history"][-1]["event"] == "gave_up"
    assert steady["pid"] is None


async def test_a_run_shorter_than_start_s_is_a_failed_start_and_the_next_waits_for_it(
    tmp_path: Path, sqlite_store: Store
) -> None:
    clock = ManualClock(T0)
    env = {"MARKS": str(tmp_path / "marks")}
    programs = {
        "quick": {
            "command": script(tmp_path, "quick", "mark('start quick')\n"),
            "group": "g",
            "start_s": 3,
            "environment": env,
        },
        "after": {
            "command": [*script(tmp_path, "up", UP), "after"],
            "group": "g",
            "start_s": 3,
            "environment": env,
        },
    }
    groups = {"g": {"strategy": "rest_for_one", "backoff": {"initial_s": 5, "jitter": 0}}}
    async with running(tmp_path, sqlite_store, clock, programs=programs, groups=groups) as host:
        shown = await wait_state(host, "quick", "restarting")
        assert shown["last_exit"].startswith("start_failed: exit status 0 after")
        assert "before it had run 3 s" in shown["last_exit"]
        after = await wait_state(host, "after", "starting")
        assert after["pid"] is None  # it starts after quick, which never got going
        assert [text for text, _ in marks(tmp_path / "marks")] == ["start quick"]


async def test_a_program_is_starting_until_it_has_run_start_s_then_the_next_starts(
    tmp_path: Path, sqlite_store: Store
) -> None:
    clock = ManualClock(T0)
    command = script(tmp_path, "up", UP)
    env = {"MARKS": str(tmp_path / "marks")}
    programs = {
        name: {"command": [*command, name], "group": "g", "start_s": 3, "environment": env}
        for name in ("first", "second")
    }
    async with running(tmp_path, sqlite_store, clock, programs=programs, groups={"g": {}}) as host:
        await wait_marks(tmp_path / "marks", 1)
        assert (await wait_state(host, "first", "starting"))["state"] == "starting"
        clock.advance(2.9)
        await wait_state(host, "first", "starting")
        assert len(marks(tmp_path / "marks")) == 1
        clock.advance(0.1)
        await wait_state(host, "first", "running")
        await wait_marks(tmp_path / "marks", 2)
        await wait_for_async(lambda: marks(tmp_path / "marks")[1][0] == "start second")
