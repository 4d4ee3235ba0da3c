"""The canvas where time matters: an agent's heartbeat against its timeout, a restart's
backoff counting down. The server's clock is the test's: every figure the page shows is
the server's, read after the test moved the clock."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from watchkeeper.clock import ManualClock
from watchkeeper.server.app import reports_for
from watchkeeper.store.runs import NewRun

from .conftest import Dashboard
from .test_canvas_support import *  # noqa: F403 - its fixtures, found by their names
from .test_canvas_support import (
    CANVAS,
    Fingers,
    advance,
    canvas_json,
    fact,
    on_canvas,
    open_canvas,
    shot,
)
from .test_canvas_touch import _centre, _view

# Tap an agent: its heartbeat's age against its timeout --------------------------------


def _agent(dashboard: Dashboard) -> str:
    """Work reporting itself with a 60 s lease: an agent."""
    new = NewRun("crawl", "agent-7", "crawl docs.example.org", None, "none", 3600.0, None, 60)
    reports_for(dashboard.runtime).start(new)
    return "crawl/agent-7"


def _heartbeat(page: Any, dashboard: Dashboard, clock: ManualClock, press: Any) -> dict[str, Any]:
    """The agent's facts shown and checked, late at last; the server's view of it then."""
    agent = _agent(dashboard)
    advance(dashboard, clock, 25)
    page.reload()
    press(on_canvas(page, f'[data-key="agent:{agent}"]'))
    found = next(a for a in canvas_json(page, dashboard)["agents"] if a["id"] == agent)
    assert (found["heartbeat_age_s"], found["timeout_s"], found["left_s"]) == (25, 60, 35)
    expect(fact(page, "Heartbeat")).to_have_text("25 s ago")
    expect(fact(page, "Timeout")).to_have_text("60 s")
    expect(fact(page, "Left")).to_have_text("35 s")
    # Silent past its timeout: late, and drawn so.
    advance(dashboard, clock, 45)
    page.reload()
    node = on_canvas(page, f'[data-key="agent:{agent}"]')
    expect(node).to_have_attribute("data-state", "late")
    press(node)
    expect(fact(page, "Heartbeat")).to_have_text("70 s ago")
    expect(fact(page, "Left")).to_have_text("none: late by 10 s")
    late: dict[str, Any] = next(
        a for a in canvas_json(page, dashboard)["agents"] if a["id"] == agent
    )
    return late


def test_a_tap_on_an_agent_shows_its_heartbeat_age_against_its_timeout(
    clocked: tuple[Dashboard, ManualClock], browser: Any, contexts: list[Any]
) -> None:
    dashboard, clock = clocked
    page = open_canvas(dashboard, browser, contexts, phone=True)
    late = _heartbeat(page, dashboard, clock, lambda target: page.touchscreen.tap(*_centre(target)))
    assert (late["heartbeat_age_s"], late["left_s"]) == (70, -10)
    shot(page, "agent-heartbeat")


def test_a_click_on_an_agent_shows_its_heartbeat_age_against_its_timeout(
    clocked: tuple[Dashboard, ManualClock], browser: Any, contexts: list[Any]
) -> None:
    dashboard, clock = clocked
    page = open_canvas(dashboard, browser, contexts, phone=False)
    late = _heartbeat(page, dashboard, clock, lambda target: target.click())
    assert (late["heartbeat_age_s"], late["left_s"]) == (70, -10)


# Pinch a restart edge: the backoff on a timeline, the current delay counting down ------


def _flaky(page: Any, dashboard: Dashboard) -> dict[str, Any]:
    found = canvas_json(page, dashboard)
    programs = next(t for t in found["trees"] if t["id"] == "programs")
    node: dict[str, Any] = next(c for c in programs["children"] if c["id"] == "programs/flaky")
    return node


def _timeline(page: Any, dashboard: Dashboard, clock: ManualClock) -> int:
    """The backoff's timeline and countdown checked; seconds left as the server says."""
    plan = _flaky(page, dashboard)["backoff_plan"]
    assert (plan["attempt"], plan["restart_in_s"]) == (1, 30)
    steps = page.locator("#sup-extra .sup-timeline li")
    expect(steps).to_have_text(["30 s", "60 s", "120 s", "240 s", "300 s"])
    expect(steps.nth(0)).to_have_attribute("aria-current", "step")
    countdown = page.locator("#sup-extra .sup-countdown")
    expect(countdown).to_have_text("restart 1 in 30 s (of 30 s)")
    # The server's clock moves 12 s: the page counts down by the server's number.
    advance(dashboard, clock, 12)
    left: int = _flaky(page, dashboard)["backoff_plan"]["restart_in_s"]
    expect(countdown).to_have_text("restart 1 in 18 s (of 30 s)")
    return left


def _restarting(page: Any, dashboard: Dashboard) -> Any:
    wait = r", restarting, \d+ restarts$"
    node = page.locator(f'{CANVAS} .sn[data-node="programs/flaky"]')
    expect(node).to_have_attribute("aria-label", re.compile(wait))
    expect(page.locator(f"{CANVAS} .sup-edge.restart")).to_have_count(1)
    return on_canvas(page, '[data-node="programs/flaky"]')


def test_a_pinch_on_a_restart_edge_shows_the_backoff_counting_down(
    clocked: tuple[Dashboard, ManualClock], browser: Any, contexts: list[Any]
) -> None:
    dashboard, clock = clocked
    page = open_canvas(dashboard, browser, contexts, phone=True)
    node = _restarting(page, dashboard)
    start = _view(page)
    x, y = _centre(node)
    fingers = Fingers(page)
    fingers.down((x - 80, y), (x + 80, y))
    for gap in (60, 40, 25, 15):
        fingers.move((x - gap, y), (x + gap, y))
    fingers.up()
    assert _timeline(page, dashboard, clock) == 18
    assert _view(page)["scale"] == start["scale"]
    shot(page, "backoff-timeline")


def test_b_on_a_restarting_program_shows_the_backoff_counting_down(
    clocked: tuple[Dashboard, ManualClock], browser: Any, contexts: list[Any]
) -> None:
    dashboard, clock = clocked
    page = open_canvas(dashboard, browser, contexts, phone=False)
    _restarting(page, dashboard)
    page.keyboard.press("b")
    assert _timeline(page, dashboard, clock) == 18
