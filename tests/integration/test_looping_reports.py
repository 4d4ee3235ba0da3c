"""Progress that is not progress, over the HTTP API with an injected clock: the same report
again and again is looping, a new step or a higher count moves the run on, and a step's own
budget holds until the next report. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from watchkeeper import Client
from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action
from watchkeeper.notify import cards
from watchkeeper.runtime import Runtime
from watchkeeper.store.incidents import IncidentStatus

from ..support.live_server import LiveServer, live_server
from .helpers import start, sweep

KIND = "chat_turn"


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


@pytest.fixture
def reporter(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client("reporter") as http:
        yield http


def report(http: httpx.Client, run_id: str, **body: Any) -> dict[str, Any]:
    answer = http.post(f"/api/v1/runs/{KIND}/{run_id}/progress", json=body)
    assert answer.status_code == 200, answer.text
    shown: dict[str, Any] = answer.json()
    return shown


def live(runtime: Runtime) -> list[tuple[str, str, str]]:
    return sorted(
        (i.key.run_id, i.key.condition, i.status.value)
        for i in runtime.store.incidents.list("live")
    )


def test_five_identical_reports_loop_and_a_new_step_moves_on(
    runtime: Runtime, clock: ManualClock, reporter: httpx.Client, server: LiveServer
) -> None:
    start(runtime, "t-1", KIND, budget_s=600, lease_s=3600)
    clock.advance(30)
    first = report(reporter, "t-1", step="calling web.search")
    for _ in range(3):
        clock.advance(10)
        shown = report(reporter, "t-1", step="calling web.search")
    assert shown["repeats"] == 4
    assert shown["progress_at"] == first["progress_at"]  # a repeat moves nothing
    assert shown["state_token"] == first["state_token"]  # so a card's buttons stay good
    assert sweep(runtime).applied.opened == ()

    clock.advance(10)
    fifth = report(reporter, "t-1", step="calling web.search")
    assert fifth["repeats"] == 5
    assert fifth["reported_at"] != fifth["progress_at"]
    (opened,) = sweep(runtime).applied.opened
    incident = runtime.store.incidents.get(opened)
    assert incident.key.condition == "looping"
    assert incident.reason == "repeating 'calling web.search' 5 times since 12:00 UTC"
    assert incident.since.isoformat() == first["progress_at"].replace("Z", "+00:00")
    message = cards.card(incident, [Action.CANCEL, Action.DISMISS, Action.DIAGNOSE])
    assert message.headline == f"{KIND} t-1 is looping"
    assert "looping since 2026-01-05 12:00 UTC" in message.text
    assert "repeating 'calling web.search' 5 times since 12:00 UTC" in message.text
    with server.client("viewer") as viewer:
        shown_run = viewer.get(f"/api/v1/runs/{KIND}/t-1").json()
    assert shown_run["verdict"]["condition"] == "looping"
    assert shown_run["incident_id"] == opened

    # Still the same: still the one incident.
    clock.advance(10)
    report(reporter, "t-1", step="calling web.search")
    still = sweep(runtime).applied
    assert still.opened == still.reopened == still.recovered == still.resolved == ()
    assert live(runtime) == [("t-1", "looping", "open")]

    clock.advance(10)
    moved = report(reporter, "t-1", step="reading the results")
    assert moved["repeats"] == 1 and moved["progress_at"] == moved["reported_at"]
    assert sweep(runtime).applied.recovered == (opened,)
    recovered = runtime.store.incidents.get(opened)
    assert recovered.status is IncidentStatus.RECOVERED
    assert recovered.events[-1].detail == "moved again: reading the results"
    assert cards.moved_note(recovered, recovered.events[-1].detail).text == (
        f"{KIND} t-1 moved on (moved again: reading the results)"
    )

    # The same loop once more is the same incident, again.
    for _ in range(4):
        clock.advance(5)
        report(reporter, "t-1", step="reading the results")
    assert sweep(runtime).applied.reopened == (opened,)
    assert runtime.store.incidents.get(opened).episodes == 2


def test_a_higher_count_is_progress_under_the_same_step(
    runtime: Runtime, clock: ManualClock, reporter: httpx.Client
) -> None:
    start(runtime, "t-2", KIND, budget_s=600, lease_s=3600)
    for done in (1, 2, 3, 4, 5, 6):
        clock.advance(5)
        shown = report(reporter, "t-2", step="reading pages", done=done, total=40)
        assert shown["repeats"] == 1
    assert (shown["done"], shown["total"]) == (6, 40)
    assert sweep(runtime).applied.opened == ()

    for _ in range(4):
        clock.advance(5)
        report(reporter, "t-2", step="reading pages", done=6)
    (opened,) = sweep(runtime).applied.opened
    assert runtime.store.incidents.get(opened).reason.startswith(
        "repeating 'reading pages' at 6 of 40 5 times"
    )

    clock.advance(5)
    report(reporter, "t-2", done=7)  # the step stays; the count moved
    assert sweep(runtime).applied.recovered == (opened,)


def test_a_step_budget_stalls_the_run_and_the_runs_budget_applies_after_it(
    runtime: Runtime, clock: ManualClock, reporter: httpx.Client, server: LiveServer
) -> None:
    start(runtime, "t-3", KIND, budget_s=600, lease_s=3600)
    shown = report(reporter, "t-3", step="running the test suite", budget_s=2, expected_s=1)
    assert (shown["step_budget_s"], shown["step_expected_s"]) == (2, 1)
    clock.advance(1.5)
    with server.client("viewer") as viewer:
        slow = viewer.get(f"/api/v1/runs/{KIND}/t-3").json()
    assert slow["verdict"]["condition"] == "slow" and not slow["verdict"]["paged"]
    assert sweep(runtime).applied.opened == ()

    clock.advance(1)
    (opened,) = sweep(runtime).applied.opened
    stalled = runtime.store.incidents.get(opened)
    assert stalled.key.condition == "stalled"
    assert stalled.reason == (
        "no progress for more than 2 s, the budget of its step 'running the test suite'"
    )

    after = report(reporter, "t-3", step="writing the summary")
    assert after["step_budget_s"] is None
    assert sweep(runtime).applied.recovered == (opened,)
    clock.advance(599)
    assert sweep(runtime).applied.reopened == ()  # the run's 600 s again
    clock.advance(2)
    assert sweep(runtime).applied.reopened == (opened,)


def test_a_looping_run_whose_reports_stop_is_stalled(
    runtime: Runtime, clock: ManualClock, reporter: httpx.Client
) -> None:
    start(runtime, "t-4", KIND, budget_s=600, lease_s=3600)
    for _ in range(5):
        clock.advance(1)
        report(reporter, "t-4", step="retrying the upload")
    (looping,) = sweep(runtime).applied.opened
    clock.advance(601)
    swept = sweep(runtime).applied
    assert swept.resolved == (looping,)
    (stalled,) = swept.opened
    assert runtime.store.incidents.get(looping).resolution == "the work is now stalled"
    assert runtime.store.incidents.get(stalled).reason == (
        "no progress for more than 600 s; its last 5 reports all said 'retrying the upload'"
    )


def test_reports_that_name_nothing_are_progress_as_before(
    runtime: Runtime, clock: ManualClock, reporter: httpx.Client
) -> None:
    start(runtime, "t-5", KIND, budget_s=600, lease_s=3600)
    report(reporter, "t-5", step="crawling")
    for _ in range(8):
        clock.advance(100)
        shown = report(reporter, "t-5")
    assert shown["repeats"] == 0 and shown["step"] == "crawling"
    assert sweep(runtime).applied.opened == ()
    # A person's answer in between: the reports after it are compared afresh.
    for _ in range(4):
        report(reporter, "t-5", step="asking")
    reporter.post(f"/api/v1/runs/{KIND}/t-5/waiting", json={})
    assert report(reporter, "t-5", step="asking")["repeats"] == 1


def test_bad_report_values_are_refused_saying_which(
    reporter: httpx.Client, runtime: Runtime
) -> None:
    start(runtime, "t-6", KIND, budget_s=600, lease_s=3600)
    for body, field in (
        ({"done": -1}, "done"),
        ({"total": 2.5}, "total"),
        ({"budget_s": 0}, "budget_s"),
        ({"expected_s": "soon"}, "expected_s"),
        ({"done": True}, "done"),
    ):
        answer = reporter.post(f"/api/v1/runs/{KIND}/t-6/progress", json=body)
        assert answer.status_code == 422, body
        assert answer.json()["error"]["field"] == field, answer.text
    assert runtime.store.runs.get(KIND, "t-6").repeats == 0  # nothing was recorded
    # A process run is judged by its log: counters and step times are refused, not dropped.
    answer = reporter.post("/api/v1/runs/process/p-1/progress", json={"step": "x", "done": 3})
    assert answer.status_code == 422 and answer.json()["error"]["field"] == "done", answer.text


def test_identical_reports_for_longer_than_the_budget_loop_however_few(
    runtime: Runtime, clock: ManualClock, reporter: httpx.Client
) -> None:
    start(runtime, "t-7", KIND, budget_s=60, lease_s=3600)
    report(reporter, "t-7", step="waiting for the build")
    clock.advance(40)
    report(reporter, "t-7", step="waiting for the build")
    assert sweep(runtime).applied.opened == ()
    clock.advance(25)  # the same words for 65 s, past the 60 s budget: twice is enough
    shown = report(reporter, "t-7", step="waiting for the build")
    assert shown["repeats"] == 3
    (opened,) = sweep(runtime).applied.opened
    incident = runtime.store.incidents.get(opened)
    assert incident.key.condition == "looping"
    assert incident.reason.endswith("longer than its 60 s budget")


def test_the_python_sdk_reports_a_steps_budget_and_a_loop(
    runtime: Runtime, clock: ManualClock, server: LiveServer
) -> None:
    with (
        Client(server.url, server.tokens["reporter"]) as client,
        client.run(KIND, "sdk turn", run_id="t-8", budget_s=600) as turn,
    ):
        turn.progress("running the test suite", budget=2, expected=1)
        shown = client.get_run(KIND, "t-8")
        assert (shown["step_budget_s"], shown["step_expected_s"]) == (2, 1)
        clock.advance(2.5)
        (stalled,) = sweep(runtime).applied.opened
        assert runtime.store.incidents.get(stalled).key.condition == "stalled"
        for _ in range(5):
            clock.advance(1)
            turn.progress("retrying the upload", done=3)
        (looping,) = sweep(runtime).applied.opened
        assert runtime.store.incidents.get(looping).key.condition == "looping"
        assert client.get_run(KIND, "t-8")["step_budget_s"] is None
