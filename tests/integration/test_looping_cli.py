"""Looping and step budgets through ``watchkeeper report progress`` (the installed command,
whose fast path sends these reports, and the full command line), judged with an injected
clock; ``show`` tells the step's budget and counters."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.runtime import Runtime

from ..support.cli import WK, wk
from ..support.cli_probe import FULL_PATH
from ..support.live_server import LiveServer, live_server
from .helpers import start, sweep

KIND = "chat_turn"
FULL = (sys.executable, "-c", FULL_PATH)


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def reported(server: LiveServer, *argv: str, full: bool = False) -> None:
    """``watchkeeper report progress KIND ARGV...`` as a reporter, by either command line."""
    env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["reporter"]}
    done = wk("report", "progress", KIND, *argv, env=env, command=FULL if full else WK)
    assert done.returncode == 0, done.stderr
    assert done.stdout == done.stderr == ""


def shown(server: LiveServer, run_id: str) -> subprocess.CompletedProcess[str]:
    viewer = server.tokens["viewer"]
    return wk("show", f"{KIND}/{run_id}", "--server", server.url, "--token", viewer)


@pytest.mark.parametrize("full", [False, True], ids=["fast", "full"])
def test_five_identical_reports_loop_and_a_higher_count_clears_it(
    runtime: Runtime, clock: ManualClock, server: LiveServer, full: bool
) -> None:
    start(runtime, "c-1", KIND, budget_s=600, lease_s=3600)
    for _ in range(4):
        clock.advance(5)
        reported(server, "c-1", "--step", "calling web.search", "--done", "3", full=full)
    assert sweep(runtime).applied.opened == ()
    clock.advance(5)
    reported(server, "c-1", "--step", "calling web.search", "--done", "3", full=full)
    (opened,) = sweep(runtime).applied.opened
    incident = runtime.store.incidents.get(opened)
    assert incident.key.condition == "looping"
    assert incident.reason == "repeating 'calling web.search' at 3 5 times since 12:00 UTC"
    said = shown(server, "c-1")
    assert said.returncode == 0, said.stderr
    assert "verdict:   looping since" in said.stdout
    assert "step:      calling web.search · 3 of ? · said 5 times in a row" in said.stdout

    clock.advance(5)
    reported(server, "c-1", "--step", "calling web.search", "--done", "4", full=full)
    assert sweep(runtime).applied.recovered == (opened,)


@pytest.mark.parametrize("full", [False, True], ids=["fast", "full"])
def test_a_step_budget_of_two_seconds_stalls_and_the_next_report_ends_it(
    runtime: Runtime, clock: ManualClock, server: LiveServer, full: bool
) -> None:
    start(runtime, "c-2", KIND, budget_s=600, lease_s=3600)
    reported(
        server,
        "c-2",
        "-s",
        "running the test suite",
        "--budget",
        "2s",
        "--expected",
        "1s",
        "--total",
        "40",
        full=full,
    )
    said = shown(server, "c-2")
    assert "step:      running the test suite · ? of 40 · budget 2s, expected 1s" in said.stdout
    clock.advance(3)
    (opened,) = sweep(runtime).applied.opened
    assert runtime.store.incidents.get(opened).key.condition == "stalled"

    reported(server, "c-2", "--step", "writing the summary", full=full)
    assert sweep(runtime).applied.recovered == (opened,)
    clock.advance(600)
    assert sweep(runtime).applied.reopened == ()  # the run's own 600 s apply again
    clock.advance(1)
    assert sweep(runtime).applied.reopened == (opened,)

    # A long step's budget, as people write it.
    reported(server, "c-2", "--step", "fine-tuning", "--budget", "30m", full=full)
    assert runtime.store.runs.get(KIND, "c-2").step_budget_s == 1800


def test_a_bad_budget_or_count_is_told_not_sent(runtime: Runtime, server: LiveServer) -> None:
    start(runtime, "c-3", KIND, budget_s=600, lease_s=3600)
    env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["reporter"]}
    for argv, words in (
        (("--budget", "soon"), "--budget 'soon': write a duration like 90s, 10m or 2h30m"),
        (("--expected", "0"), "--expected '0': must be more than zero"),
        (("--done", "many"), "Invalid value for '--done': Input should be a valid integer"),
    ):
        refused = wk("report", "progress", KIND, "c-3", *argv, env=env)
        assert refused.returncode != 0, argv
        assert words in " ".join(refused.stderr.split()), refused.stderr
        assert "Traceback" not in refused.stderr
    assert runtime.store.runs.get(KIND, "c-3").reported_at is None  # nothing was sent


@pytest.mark.parametrize("full", [False, True], ids=["fast", "full"])
def test_a_new_step_clears_a_loop(
    runtime: Runtime, clock: ManualClock, server: LiveServer, full: bool
) -> None:
    start(runtime, "c-4", KIND, budget_s=600, lease_s=3600)
    for _ in range(5):
        clock.advance(5)
        reported(server, "c-4", "--step", "calling web.search", full=full)
    (opened,) = sweep(runtime).applied.opened
    assert runtime.store.incidents.get(opened).key.condition == "looping"
    clock.advance(5)
    reported(server, "c-4", "--step", "reading the results", full=full)
    assert sweep(runtime).applied.recovered == (opened,)
    said = shown(server, "c-4")
    assert "step:      reading the results" in said.stdout
