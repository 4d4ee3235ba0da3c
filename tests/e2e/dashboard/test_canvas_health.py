"""The canvas's health: the endpoint, the monitor's dials, the host checks' floors."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from ...support.waiting import wait_for
from .conftest import Dashboard
from .test_canvas_support import *  # noqa: F403 - its fixtures, found by their names
from .test_canvas_support import (
    CANVAS,
    Fingers,
    canvas_json,
    fact,
    on_canvas,
    open_canvas,
    post_as_page,
    program_state,
    shot,
)
from .test_canvas_touch import _centre, _view

# Tap the endpoint: copy its probe URL, switch the healthy flag -------------------------


def _endpoint(page: Any, dashboard: Dashboard, press: Any) -> dict[str, Any]:
    """The probe URL copied and the flag switched off and on; the endpoint as served then."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    press(on_canvas(page, "[data-type=endpoint]"))
    url = f"{dashboard.url}/healthz"
    expect(fact(page, "Probe URL")).to_have_text(url)
    answers = canvas_json(page, dashboard)["endpoint"]
    expect(fact(page, "Answers")).to_have_text(f"{answers['status']} (HTTP {answers['code']})")
    press(page.locator("#sup-extra").get_by_role("button", name="Copy probe URL"))
    expect(page.locator("#sup-answer")).to_have_text(f"Copied {url}")
    assert page.evaluate("navigator.clipboard.readText()") == url
    press(page.locator("#sup-extra").get_by_role("button", name="Switch healthy flag off"))
    expect(page.locator("#sup-answer")).to_have_text(re.compile(r"^the healthy flag is off"))
    found = canvas_json(page, dashboard)
    assert found["endpoint"]["flag_healthy"] is False
    assert found["monitor"]["status"] == "unhealthy"
    expect(fact(page, "Healthy flag")).to_have_text(
        "off (the health monitor's): switched off on the canvas"
    )
    expect(page.locator(f"{CANVAS} .sn[data-type=monitor]")).to_have_attribute(
        "data-state", "unhealthy"
    )
    press(page.locator("#sup-extra").get_by_role("button", name="Switch healthy flag on"))
    wait_for(
        lambda: canvas_json(page, dashboard)["endpoint"]["flag_healthy"], what="the flag on again"
    )
    endpoint: dict[str, Any] = canvas_json(page, dashboard)["endpoint"]
    return endpoint


def test_a_tap_on_the_endpoint_copies_its_probe_url_and_switches_the_healthy_flag(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    assert _endpoint(page, dashboard, lambda t: page.touchscreen.tap(*_centre(t)))["flag_healthy"]
    shot(page, "endpoint")


def test_clicks_on_the_endpoint_copy_its_probe_url_and_switch_the_healthy_flag(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    assert _endpoint(page, dashboard, lambda target: target.click())["flag_healthy"]


# Spread the health node: its checks fanned out as dials around the overall ring -------


def _fanned(page: Any, dashboard: Dashboard) -> list[dict[str, Any]]:
    """A dial per check and the overall ring, as served; the checks."""
    found = canvas_json(page, dashboard)["monitor"]
    dials = page.locator("#sup-extra .sup-dial:not(.sup-ring)")
    expect(dials).to_have_count(len(found["checks"]))
    for check, dial in zip(found["checks"], dials.all(), strict=True):
        expect(dial).to_have_attribute("data-check", check["name"])
        expect(dial).to_have_attribute("data-status", check["status"])
    expect(page.locator("#sup-extra .sup-ring")).to_have_attribute("data-status", found["status"])
    checks: list[dict[str, Any]] = found["checks"]
    return checks


def test_a_spread_on_the_health_node_fans_its_checks_out_as_dials(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    node = on_canvas(page, "[data-type=monitor]")
    start = _view(page)
    x, y = _centre(node)
    fingers = Fingers(page)
    fingers.down((x - 15, y), (x + 15, y))
    for gap in (30, 50, 70, 90):
        fingers.move((x - gap, y), (x + gap, y))
    fingers.up()
    assert _fanned(page, dashboard), "no health check fanned out"
    # The spread was the node's: the view kept its zoom.
    assert _view(page)["scale"] == start["scale"]
    shot(page, "health-dials")


def test_d_on_the_health_node_fans_its_checks_out_as_dials(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, "[data-type=monitor]")
    page.keyboard.press("d")
    assert _fanned(page, dashboard), "no health check fanned out"


# Tap the disk dial before a start: the headroom; a low dial holds the start -----------


def _disk(page: Any, dashboard: Dashboard) -> dict[str, Any]:
    found = next(
        h for h in canvas_json(page, dashboard)["health"] if h["name"] == "host check disk"
    )
    dial: dict[str, Any] = found["dial"]
    return dial


def _disk_dial(page: Any, dashboard: Dashboard, press: Any, screenshot: bool) -> str:
    """Headroom shown, the start held by a low dial and let go; the program's state then."""
    token = {"Authorization": f"Bearer {dashboard.token('ci')}"}
    stopped = page.request.post(f"{dashboard.url}/api/v1/programs/crawler/stop", headers=token)
    assert stopped.ok, stopped.text()
    wait_for(lambda: program_state(dashboard, "crawler") == "stopped", what="crawler stopped")
    page.reload()
    press(on_canvas(page, '[data-name="host check disk"]'))
    assert _disk(page, dashboard)["headroom_mb"] > 0
    expect(fact(page, "Headroom")).to_have_text(re.compile(r"^[\d,]+ MB above the 1 MB floor$"))
    expect(fact(page, "Starts")).to_have_text("allowed")
    start = page.locator("#sup-extra").get_by_role("button", name="Start crawler")
    expect(start).to_be_enabled()
    # The floor raised past the free space: the dial is low and holds the start.
    high = _disk(page, dashboard)["value_mb"] + 10_000_000
    answer = post_as_page(page, dashboard, "/web/canvas/host-checks/disk/floor", {"mb": high})
    assert answer["ok"], answer
    assert _disk(page, dashboard)["closed"] is True
    page.reload()
    press(on_canvas(page, '[data-name="host check disk"]'))
    expect(fact(page, "Headroom")).to_have_text(re.compile(r"^[\d,]+ MB below the "))
    expect(fact(page, "Starts")).to_have_text("paused: crawler, parser")
    expect(start).to_be_disabled()
    if screenshot:
        shot(page, "disk-dial")
    # Lowered again, the start goes ahead.
    assert post_as_page(page, dashboard, "/web/canvas/host-checks/disk/floor", {"mb": 1})["ok"]
    page.reload()
    press(on_canvas(page, '[data-name="host check disk"]'))
    expect(start).to_be_enabled()
    press(start)
    wait_for(lambda: program_state(dashboard, "crawler") == "running", what="crawler started")
    return program_state(dashboard, "crawler")


def test_a_tap_on_the_disk_dial_shows_the_headroom_and_a_low_dial_holds_the_start(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    assert (
        _disk_dial(
            page, dashboard, lambda target: page.touchscreen.tap(*_centre(target)), screenshot=True
        )
        == "running"
    )


def test_a_click_on_the_disk_dial_shows_the_headroom_and_a_low_dial_holds_the_start(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    assert _disk_dial(page, dashboard, lambda target: target.click(), screenshot=False) == "running"


# Long-press the memory dial: its floor changed ---------------------------------------


def _floor(dashboard: Dashboard) -> float | None:
    gates = dashboard.app.state.supervision.programs.gates.gates
    return next(g for g in gates if g.name == "memory").config.min_available_mb


def _new_floor(page: Any, dashboard: Dashboard, press: Any) -> None:
    sheet = page.locator("#sup-sheet")
    field = sheet.get_by_label(re.compile(r"^Fails below"))
    expect(field).to_have_value("1")
    field.fill("3")
    press(sheet.get_by_role("button", name="Change the floor"))
    press(sheet.get_by_role("button", name="Yes, change"))
    expect(page.locator("#sup-answer")).to_have_text(
        re.compile(r"^host check memory fails below 3 MB of available memory now")
    )
    assert _floor(dashboard) == 3


def test_a_long_press_on_the_memory_dial_changes_its_floor(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    fingers = Fingers(page)
    fingers.down(_centre(on_canvas(page, '[data-name="host check memory"]')))
    expect(page.locator("#sup-sheet")).to_be_visible()
    fingers.up()
    shot(page, "memory-floor")
    _new_floor(page, dashboard, lambda target: page.touchscreen.tap(*_centre(target)))


def test_shift_f10_on_the_memory_dial_changes_its_floor(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, '[data-name="host check memory"]')
    page.keyboard.press("Shift+F10")

    def press(target: Any) -> None:
        expect(target).to_be_visible()
        target.focus()
        page.keyboard.press("Enter")

    _new_floor(page, dashboard, press)
