"""The supervision canvas under a finger, a mouse and a keyboard.

Touch input is real: a context with ``has_touch`` and ``is_mobile`` at phone size,
fingers put down, moved and lifted through the browser's own input pipeline
(``Input.dispatchTouchEvent`` over CDP, or ``page.touchscreen``). The tests read
what the user sees (panels, labels, the picture's transform) and what the server
did (``/web/supervision.json``), never the script's handlers.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from watchkeeper.store.tokens import Role

from ...support.waiting import wait_for
from .conftest import Dashboard
from .test_canvas_support import (  # the canvas opened the one way every canvas test opens it
    CANVAS,
    CANVAS_LOOKS,
    Fingers,
    canvas_context,
    open_canvas,
)


def _centre(locator: Any) -> tuple[float, float]:
    # A live update redraws the picture (focus kept): a node read in the middle of a redraw
    # has no box, and the next look finds the new one where the old one was.
    box = wait_for(locator.bounding_box, what="the node drawn")
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def _view(page: Any) -> dict[str, float]:
    """The picture's zoom and offset, as the canvas draws them."""
    found: dict[str, float] = page.evaluate(
        """(selector) => {
            const svg = document.querySelector(selector);
            const t = svg.querySelector('#sup-view').getAttribute('transform');
            const [x, y, s] = t.match(/-?[\\d.]+/g).map(Number);
            return {x, y, scale: s};
        }""",
        CANVAS,
    )
    return found


def _supervision(page: Any, dashboard: Dashboard) -> dict[str, Any]:
    response = page.request.get(f"{dashboard.url}/web/supervision.json")
    assert response.ok, response.status
    found: dict[str, Any] = response.json()
    return found


def _child(found: dict[str, Any], node_id: str) -> dict[str, Any] | None:
    def walk(children: list[dict[str, Any]]) -> dict[str, Any] | None:
        for child in children:
            if child["id"] == node_id:
                return child
            hit = walk(child.get("children") or [])
            if hit:
                return hit
        return None

    for tree in found["trees"]:
        hit = walk(tree["children"])
        if hit:
            return hit
    return None


def _blank(page: Any) -> tuple[float, float]:
    """A point on the canvas with no node under it (right of the picture)."""
    box = page.locator(CANVAS).bounding_box()
    assert box is not None
    return box["x"] + box["width"] - 8, box["y"] + box["height"] - 8


# Touch --------------------------------------------------------------------------------


def test_a_tap_shows_the_tapped_nodes_details(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    child = page.locator(f"{CANVAS} .sn[data-type=child]").first
    name = child.get_attribute("data-name")
    node_id = child.get_attribute("data-node")
    page.touchscreen.tap(*_centre(child))
    panel = page.locator("#sup-panel")
    expect(panel).to_be_visible()
    expect(panel.get_by_role("heading")).to_have_text(name or "")
    expect(panel.locator("dd").nth(1)).to_have_text(node_id or "")
    expect(child).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator("#sup-sheet")).to_be_hidden()


def test_a_long_press_offers_the_childs_actions_and_restart_restarts_it(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    child = page.locator(f"{CANVAS} .sn[data-type=child][data-state=running]").first
    node_id = str(child.get_attribute("data-node"))
    before = _child(_supervision(page, dashboard), node_id)
    assert before is not None
    fingers = Fingers(page)
    fingers.down(_centre(child))
    sheet = page.locator("#sup-sheet")
    # Held until the sheet shows: a press, not a tap.
    expect(sheet).to_be_visible()
    fingers.up()
    expect(sheet.get_by_role("button", name="Restart")).to_be_visible()
    expect(sheet.get_by_role("button", name="Stop")).to_be_visible()
    page.touchscreen.tap(*_centre(sheet.get_by_role("button", name="Restart")))
    yes = sheet.get_by_role("button", name="Yes, restart")
    expect(yes).to_be_visible()
    page.touchscreen.tap(*_centre(yes))
    expect(page.locator("#sup-answer")).not_to_be_empty()
    expect(page.locator("#sup-answer")).not_to_have_text(re.compile(r"…$"))
    wait_for(
        lambda: (
            (_child(_supervision(page, dashboard), node_id) or {}).get("restarts", 0)
            > before["restarts"]
        ),
        what=f"{node_id} restarted",
    )
    # The picture follows.
    expect(page.locator(f'{CANVAS} .sn[data-node="{node_id}"]')).to_have_attribute(
        "aria-label", re.compile(rf", {before['restarts'] + 1} restarts")
    )


def _opened_panel(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> tuple[Any, str, Fingers, tuple[float, float]]:
    """A node's details panel opened by a tap on a phone: the panel, the transform it
    rests at, fingers on that screen and the panel's centre."""
    page = open_canvas(dashboard, browser, contexts, phone=True)
    page.touchscreen.tap(*_centre(page.locator(f"{CANVAS} .sn").first))
    panel = page.locator("#sup-panel")
    expect(panel).to_be_visible()
    resting = panel.evaluate("(element) => getComputedStyle(element).transform")
    return panel, resting, Fingers(page), _centre(panel)


def test_a_flick_dismisses_the_panel_and_a_slow_drag_does_not(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    panel, resting, fingers, (x, y) = _opened_panel(dashboard, browser, contexts)
    fingers.swipe((x, y), (x, y + 50), ms=2000)
    expect(panel).to_be_visible()
    # The panel eases back to where it rests before the flick starts on it.
    expect(panel).to_have_css("transform", resting)
    fingers.swipe((x, y), (x, y + 160), ms=120)
    expect(panel).to_be_hidden()


def test_a_dragged_panel_follows_the_finger_at_once_and_eases_back_when_let_go(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    panel, resting, fingers, (x, y) = _opened_panel(dashboard, browser, contexts)
    fingers.down((x, y))
    fingers.move((x, y + 30), after_s=0.5)
    offset = "(element) => new DOMMatrix(getComputedStyle(element).transform).m42"
    wait_for(lambda: panel.evaluate(offset) == 30, what="the panel 30 px down, under the finger")
    # Under the finger nothing eases: the panel is where the finger is, not on its way there.
    assert panel.evaluate("(element) => getComputedStyle(element).transitionDuration") == "0s"
    fingers.up(after_s=0.5)
    expect(panel).to_be_visible()
    expect(panel).to_have_css("transform", resting)


def test_pinch_zooms_out_around_the_fingers_and_spread_zooms_back_in(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    start = _view(page)
    box = page.locator(CANVAS).bounding_box()
    assert box is not None
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    fingers = Fingers(page)
    fingers.down((cx - 120, cy), (cx + 120, cy))
    for gap in (100, 80, 60):
        fingers.move((cx - gap, cy), (cx + gap, cy))
    fingers.up()
    page.wait_for_function(
        "([s, was]) => Number(document.querySelector(s).dataset.scale) < was - 0.01",
        arg=[CANVAS, start["scale"]],
    )
    pinched = _view(page)
    assert pinched["scale"] == pytest.approx(start["scale"] / 2, rel=0.02)
    # The point between the fingers stayed between them.
    mid = (cx - box["x"], cy - box["y"])
    world = ((mid[0] - start["x"]) / start["scale"], (mid[1] - start["y"]) / start["scale"])
    assert pinched["x"] + world[0] * pinched["scale"] == pytest.approx(mid[0], abs=1)

    fingers.down((cx - 60, cy), (cx + 60, cy))
    for gap in (80, 100, 120):
        fingers.move((cx - gap, cy), (cx + gap, cy))
    fingers.up()
    page.wait_for_function(
        "([s, was]) => Number(document.querySelector(s).dataset.scale) > was + 0.01",
        arg=[CANVAS, pinched["scale"]],
    )
    spread = _view(page)
    assert spread["scale"] == pytest.approx(start["scale"], rel=0.02)
    assert spread["x"] == pytest.approx(start["x"], abs=1)

    # However far the fingers go, the zoom stays between 30% and 300%.
    fingers.down((cx - 150, cy), (cx + 150, cy))
    fingers.move((cx - 2, cy), (cx + 2, cy))
    fingers.up()
    expect(page.locator(CANVAS)).to_have_attribute("data-scale", "0.3000")
    fingers.down((cx - 2, cy), (cx + 2, cy))
    fingers.move((cx - 150, cy), (cx + 150, cy))
    fingers.up()
    expect(page.locator(CANVAS)).to_have_attribute("data-scale", "3.0000")


def test_a_one_finger_drag_moves_the_view(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    start = _view(page)
    # From empty ground: a finger held still on a node would become a long press.
    box = page.locator(CANVAS).bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] - 20, box["y"] + 20
    Fingers(page).swipe((x, y), (x - 70, y + 90), ms=600)
    page.wait_for_function(
        "([s, was]) => Number(document.querySelector(s).dataset.tx) !== was",
        arg=[CANVAS, start["x"]],
    )
    moved = _view(page)
    assert (moved["x"] - start["x"], moved["y"] - start["y"]) == pytest.approx((-70, 90), abs=1)
    assert moved["scale"] == start["scale"]
    # A drag is not a tap: nothing was selected.
    expect(page.locator("#sup-panel")).to_be_hidden()


# Mouse and keyboard -------------------------------------------------------------------


def test_click_selects_right_click_offers_actions_and_escape_closes_each_in_turn(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    child = page.locator(f"{CANVAS} .sn[data-type=child]").first
    child.click()
    panel = page.locator("#sup-panel")
    expect(panel.get_by_role("heading")).to_have_text(child.get_attribute("data-name") or "")
    child.click(button="right")
    sheet = page.locator("#sup-sheet")
    expect(sheet.get_by_role("button", name="Restart")).to_be_visible()
    page.keyboard.press("Escape")
    expect(sheet).to_be_hidden()
    expect(panel).to_be_visible()
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(child).to_be_focused()
    # The panel's Actions button is the right-click's twin.
    child.click()
    panel.get_by_role("button", name="Actions").click()
    expect(sheet.get_by_role("button", name="Stop")).to_be_visible()
    sheet.get_by_role("button", name="Close").click()
    expect(sheet).to_be_hidden()


def test_the_wheel_and_buttons_zoom_and_a_mouse_drag_pans(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    start = _view(page)
    page.get_by_role("button", name="Zoom in").click()
    expect(page.locator(CANVAS)).to_have_attribute("data-scale", f"{start['scale'] * 1.25:.4f}")
    page.get_by_role("button", name="Zoom out").click()
    expect(page.locator(CANVAS)).to_have_attribute("data-scale", f"{start['scale']:.4f}")
    x, y = _blank(page)
    page.mouse.move(x, y)
    page.keyboard.down("Control")
    page.mouse.wheel(0, 200)
    page.keyboard.up("Control")
    page.wait_for_function(
        "([s, was]) => Number(document.querySelector(s).dataset.scale) < was",
        arg=[CANVAS, start["scale"]],
    )
    page.get_by_role("button", name="Reset view").click()
    expect(page.locator(CANVAS)).to_have_attribute("data-scale", f"{start['scale']:.4f}")
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 50, y - 30, steps=5)
    page.mouse.up()
    moved = _view(page)
    assert (moved["x"] - start["x"], moved["y"] - start["y"]) == pytest.approx((-50, -30), abs=1)
    expect(page.locator("#sup-panel")).to_be_hidden()


def test_tab_reaches_each_node_enter_selects_arrows_pan_and_plus_minus_zoom(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    nodes = page.locator(f"{CANVAS} .sn")
    page.get_by_role("button", name="Reset view").focus()
    page.keyboard.press("Tab")
    expect(nodes.nth(0)).to_be_focused()
    page.keyboard.press("Tab")
    expect(nodes.nth(1)).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#sup-panel").get_by_role("heading")).to_have_text(
        nodes.nth(1).get_attribute("data-name") or ""
    )
    start = _view(page)
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowUp")
    moved = _view(page)
    assert (moved["x"] - start["x"], moved["y"] - start["y"]) == (40, 40)
    page.keyboard.press("+")
    expect(page.locator(CANVAS)).to_have_attribute("data-scale", f"{start['scale'] * 1.25:.4f}")
    page.keyboard.press("-")
    expect(page.locator(CANVAS)).to_have_attribute("data-scale", f"{start['scale']:.4f}")
    page.keyboard.press("Escape")
    expect(page.locator("#sup-panel")).to_be_hidden()
    expect(nodes.nth(1)).to_be_focused()


def test_a_restart_made_elsewhere_redraws_the_canvas_from_the_stream(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    child = page.locator(f"{CANVAS} .sn[data-type=child][data-state=running]").first
    node_id = str(child.get_attribute("data-node"))
    restarts = (_child(_supervision(page, dashboard), node_id) or {})["restarts"]
    child.click()
    drawn = page.locator(CANVAS).get_attribute("data-drawn")
    # Through the API, not this page: only the stream can tell the page.
    token = {"Authorization": f"Bearer {dashboard.token('ci')}"}
    answer = page.context.request.post(
        f"{dashboard.url}/api/v1/supervision/children/{node_id}/restart", headers=token
    )
    assert answer.ok, answer.text()
    redrawn = page.locator(f'{CANVAS} .sn[data-node="{node_id}"]')
    expect(redrawn).to_have_attribute("aria-label", re.compile(rf", {restarts + 1} restarts"))
    expect(page.locator(CANVAS)).not_to_have_attribute("data-drawn", drawn or "")
    # The view and the selection outlive the redraw.
    expect(redrawn).to_have_class(re.compile(r"\bselected\b"))
    restarts_fact = page.locator("#sup-panel dt:text-is('Restarts') + dd")
    expect(restarts_fact).to_have_text(str(restarts + 1))


def _breaker(found: dict[str, Any], name: str) -> dict[str, Any]:
    return next(b for b in found["breakers"] if b["name"] == name)


def test_a_long_press_on_a_closed_breaker_offers_open_and_opens_it(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    dashboard.app.state.supervision.add_breaker("notify:mail", "server/sweeper")
    page = open_canvas(dashboard, browser, contexts, phone=True)
    breaker = page.locator(f'{CANVAS} .sn[data-type=breaker][data-name="notify:mail"]')
    expect(breaker).to_have_attribute("data-state", "closed")
    fingers = Fingers(page)
    fingers.down(_centre(breaker))
    sheet = page.locator("#sup-sheet")
    expect(sheet).to_be_visible()
    fingers.up()
    expect(sheet.get_by_role("button")).to_have_text(["Open breaker", "Close"])
    page.touchscreen.tap(*_centre(sheet.get_by_role("button", name="Open breaker")))
    page.touchscreen.tap(*_centre(sheet.get_by_role("button", name="Yes, open")))
    wait_for(
        lambda: _breaker(_supervision(page, dashboard), "notify:mail")["state"] == "open",
        what="the breaker forced open",
    )
    expect(breaker).to_have_attribute("data-state", "open")
    expect(breaker).to_have_class(re.compile(r"\bbad\b"))
    # Open, it offers nothing more.
    page.touchscreen.tap(*_centre(page.locator("#sup-close")))
    expect(page.locator("#sup-panel")).to_be_hidden()
    fingers.down(_centre(breaker))
    expect(sheet.get_by_text("No action applies")).to_be_visible()
    fingers.up()


def test_the_context_menu_key_offers_stop_and_stop_stops_the_child(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    child = page.locator(f"{CANVAS} .sn[data-type=child][data-state=running]").last
    node_id = str(child.get_attribute("data-node"))
    child.focus()
    page.keyboard.press("Shift+F10")
    sheet = page.locator("#sup-sheet")
    stop = sheet.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    stop.focus()
    page.keyboard.press("Enter")
    expect(sheet.get_by_role("button", name="Yes, stop")).to_be_focused()
    page.keyboard.press("Enter")
    wait_for(
        lambda: (_child(_supervision(page, dashboard), node_id) or {}).get("state") == "stopped",
        what=f"{node_id} stopped",
    )
    expect(page.locator(f'{CANVAS} .sn[data-node="{node_id}"]')).to_have_attribute(
        "data-state", "stopped"
    )
    expect(page.locator("#sup-answer")).not_to_be_empty()
    expect(page.locator("#sup-actions")).to_be_focused()


def _fail() -> None:
    raise RuntimeError("the mail server refused")


@pytest.mark.parametrize(("phone", "scheme"), CANVAS_LOOKS)
def test_a_breakers_failure_count_is_redrawn_as_it_moves_within_a_state(
    dashboard: Dashboard, browser: Any, contexts: list[Any], phone: bool, scheme: str
) -> None:
    breaker = dashboard.app.state.supervision.add_breaker("notify:mail", "server/sweeper")
    page = open_canvas(dashboard, browser, contexts, phone, scheme)
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    node = page.locator(f'{CANVAS} .sn[data-type=breaker][data-name="notify:mail"]')
    expect(node.locator("text.sub")).to_have_text("breaker · closed · 0 failures")
    for _ in range(2):
        with pytest.raises(RuntimeError):
            breaker.call(_fail)
    found = _breaker(_supervision(page, dashboard), "notify:mail")
    assert (found["state"], found["failures"]) == ("closed", 2)
    # Still closed: only the count moved, and the picture says so.
    expect(node.locator("text.sub")).to_have_text("breaker · closed · 2 failures")


def test_the_legend_draws_its_shapes_rather_than_trusting_a_font_to_have_them(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    shapes = page.locator(".sup-legend .sup-shape")
    expect(shapes).to_have_count(2)
    for shape in shapes.all():
        expect(shape.locator("svg path, svg rect")).to_have_count(1)
        assert shape.inner_text().strip() == ""
    health = shapes.nth(1).locator("svg")
    box = health.bounding_box()
    assert box is not None and box["width"] >= 12 and box["height"] >= 6


@pytest.mark.parametrize(("phone", "scheme"), CANVAS_LOOKS)
def test_a_viewer_is_offered_no_restart_or_stop_on_the_canvas(
    dashboard: Dashboard, browser: Any, contexts: list[Any], phone: bool, scheme: str
) -> None:
    context = canvas_context(browser, contexts, phone, scheme)
    page = dashboard.login(context.new_page(), "vic", Role.VIEWER)
    page.goto(f"{dashboard.url}/web/supervision")
    child = page.locator(f"{CANVAS} .sn[data-type=child][data-state=running]").first
    expect(child).to_be_visible()
    sheet = page.locator("#sup-sheet")
    if phone:
        fingers = Fingers(page)
        fingers.down(_centre(child))
        expect(sheet).to_be_visible()
        fingers.up()
    else:
        child.click(button="right")
        expect(sheet).to_be_visible()
    expect(sheet.get_by_role("button", name="Restart")).to_have_count(0)
    expect(sheet.get_by_role("button", name="Stop")).to_have_count(0)
    expect(sheet).to_contain_text("Only admins")
    # The details offer no Actions button either.
    expect(page.locator("#sup-panel")).to_be_visible()
    expect(page.locator("#sup-actions")).to_be_hidden()
