"""The canvas's breakers spread open: their recent successes and failures, as a strip of
ticks and a list, each call made for real through the server's own breaker."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest
from playwright.sync_api import expect

from watchkeeper.supervise import CircuitBreaker

from .conftest import Dashboard
from .test_canvas_support import *  # noqa: F403 - its fixtures, found by their names
from .test_canvas_support import CANVAS, Fingers, canvas_json, fact, on_canvas, open_canvas, shot
from .test_canvas_touch import _centre, _view

BREAKER = "notify:mail"
#: What each failure raised: the first carries a secret the page must never show.
REFUSED = "the mail server refused: password=hunter2hunter2"
TIMED_OUT = "the mail server timed out"


def _fail(message: str) -> None:
    raise RuntimeError(message)


def _called(dashboard: Dashboard) -> CircuitBreaker:
    """A breaker on the sweeper, called through for real: a refusal, a success, a timeout."""
    breaker = dashboard.app.state.supervision.add_breaker(BREAKER, "server/sweeper")
    with pytest.raises(RuntimeError):
        breaker.call(_fail, REFUSED)
    breaker.call(lambda: None)
    with pytest.raises(RuntimeError):
        breaker.call(_fail, TIMED_OUT)
    return breaker


def _utc(at: str) -> str:
    return datetime.fromisoformat(at).strftime("%H:%M:%S UTC")


def _calls_shown(page: Any, dashboard: Dashboard, breaker: CircuitBreaker) -> None:
    """The panel shows what the server holds: the counts, the strip oldest to newest, and
    each call newest first with its time and, for a failure, its redacted reason."""
    row = next(b for b in canvas_json(page, dashboard)["breakers"] if b["name"] == BREAKER)
    recent = row["recent"]
    assert [c["ok"] for c in recent] == [False, True, False]
    assert [c.ok for c in breaker.recent_calls()] == [False, True, False]
    assert (row["successes"], row["failures"], row["rejections"]) == (1, 2, 0)
    calls = page.locator("#sup-extra .sup-calls")
    expect(calls.locator(".sup-calls-total")).to_have_text(
        f"The last 3 calls: 1 succeeded, 2 failed. In all: 1 success, "
        f"{row['failures']} failures, {row['rejections']} rejected."
    )
    expect(fact(page, "Successes")).to_have_text(str(row["successes"]))
    expect(fact(page, "Failures")).to_have_text(str(row["failures"]))
    ticks = calls.locator(".sup-strip rect")
    expect(ticks).to_have_count(len(recent))
    for call, tick in zip(reversed(recent), ticks.all(), strict=True):
        expect(tick).to_have_class("ok" if call["ok"] else "bad")
    lines = calls.locator(".sup-calls-list li")
    expect(lines).to_have_count(len(recent))
    for call, line in zip(recent, lines.all(), strict=True):
        expect(line.locator("time")).to_have_text(_utc(call["at"]))
        expect(line.locator("time")).to_have_attribute("datetime", call["at"])
        expect(line).to_have_attribute("data-ok", "true" if call["ok"] else "false")
    expect(lines.nth(0)).to_have_text(f"{_utc(recent[0]['at'])} failure: RuntimeError: {TIMED_OUT}")
    expect(lines.nth(1)).to_have_text(f"{_utc(recent[1]['at'])} success")
    expect(lines.nth(2).locator(".sup-call-why")).to_have_text(
        "RuntimeError: the mail server refused: password=[redacted]"
    )
    assert "hunter2" not in page.locator("#sup-panel").inner_text()
    assert "hunter2" not in str(row)


def test_a_spread_on_a_breaker_shows_its_recent_successes_and_failures(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    breaker = _called(dashboard)
    page = open_canvas(dashboard, browser, contexts, phone=True)
    node = on_canvas(page, f'[data-type=breaker][data-name="{BREAKER}"]')
    start = _view(page)
    x, y = _centre(node)
    fingers = Fingers(page)
    fingers.down((x - 15, y), (x + 15, y))
    for gap in (30, 50, 70, 90):
        fingers.move((x - gap, y), (x + gap, y))
    fingers.up()
    _calls_shown(page, dashboard, breaker)
    # The spread was the breaker's: the view kept its zoom.
    assert _view(page)["scale"] == start["scale"]
    shot(page, "breaker-calls")


def test_h_on_a_breaker_shows_its_recent_successes_and_failures(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    breaker = _called(dashboard)
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, f'[data-type=breaker][data-name="{BREAKER}"]')
    # The twin is told where the canvas tells its others, and on the panel's button.
    expect(page.locator("#sup-hint")).to_contain_text("spread two fingers on a breaker (or H)")
    page.keyboard.press("h")
    _calls_shown(page, dashboard, breaker)
    button = page.locator("#sup-extra").get_by_role("button", name="Recent calls")
    expect(button).to_have_attribute("title", re.compile(r"or H on it\)$"))
    expect(page.locator(f"{CANVAS} .sn.selected")).to_have_attribute("data-name", BREAKER)
