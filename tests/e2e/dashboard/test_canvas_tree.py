"""The canvas's tree: groups opened, strategies turned, trees shelled, breakers read, the
view flicked."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from watchkeeper.supervise import CircuitBreaker, CircuitState

from ...integration.recorder import Recorder
from ...support.waiting import wait_for
from .conftest import Dashboard
from .test_canvas_support import *  # noqa: F403 - its fixtures, found by their names
from .test_canvas_support import (
    CANVAS,
    Fingers,
    canvas_json,
    double_tap,
    fact,
    on_canvas,
    open_canvas,
    program_state,
    shot,
)
from .test_canvas_touch import _centre, _view

# Double-tap a supervisor: its children, with their restart counts ---------------------


def _children_shown(page: Any, dashboard: Dashboard) -> None:
    found = canvas_json(page, dashboard)
    programs = next(t for t in found["trees"] if t["id"] == "programs")
    group = next(c for c in programs["children"] if c["id"] == "programs/crawl")
    for child in group["children"]:
        node = page.locator(f'{CANVAS} .sn[data-node="{child["id"]}"]')
        expect(node).to_have_attribute(
            "aria-label", re.compile(rf", {child['restarts']} restarts$")
        )


def test_a_double_tap_on_a_group_opens_its_children_with_their_restarts(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    group = on_canvas(page, '[data-node="programs/crawl"]')
    expect(group).to_have_attribute("aria-label", re.compile(r", folded$"))
    expect(page.locator(f'{CANVAS} .sn[data-node^="programs/crawl/"]')).to_have_count(0)
    double_tap(page, _centre(group))
    expect(page.locator(f'{CANVAS} .sn[data-node^="programs/crawl/"]')).to_have_count(2)
    _children_shown(page, dashboard)
    shot(page, "expand-children")
    double_tap(page, _centre(group))
    expect(page.locator(f'{CANVAS} .sn[data-node^="programs/crawl/"]')).to_have_count(0)


def test_a_double_click_or_e_opens_a_groups_children_with_their_restarts(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    group = on_canvas(page, '[data-node="programs/crawl"]')
    group.dblclick()
    expect(page.locator(f'{CANVAS} .sn[data-node^="programs/crawl/"]')).to_have_count(2)
    _children_shown(page, dashboard)
    page.locator(f'{CANVAS} .sn[data-node="programs/crawl"]').focus()
    page.keyboard.press("e")
    expect(page.locator(f'{CANVAS} .sn[data-node^="programs/crawl/"]')).to_have_count(0)
    page.keyboard.press("e")
    expect(page.locator(f'{CANVAS} .sn[data-node^="programs/crawl/"]')).to_have_count(2)


# Tap a breaker: its state and counts --------------------------------------------------


def _fail() -> None:
    raise RuntimeError("the mail server refused")


def _breaker_facts(page: Any, dashboard: Dashboard, press: Any) -> dict[str, Any]:
    """Two failures and a success, shown as counted; the breaker as served."""
    breaker = dashboard.app.state.supervision.add_breaker("notify:mail", "server/sweeper")
    for _ in range(2):
        with pytest.raises(RuntimeError):
            breaker.call(_fail)
    breaker.call(lambda: None)
    page.reload()
    node = on_canvas(page, '[data-type=breaker][data-name="notify:mail"]')
    press(node)
    breakers = canvas_json(page, dashboard)["breakers"]
    found: dict[str, Any] = next(b for b in breakers if b["name"] == "notify:mail")
    expect(fact(page, "State")).to_have_text(found["state"])
    expect(fact(page, "Failures")).to_have_text(str(found["failures"]))
    expect(fact(page, "Successes")).to_have_text(str(found["successes"]))
    expect(fact(page, "Rejected")).to_have_text(str(found["rejections"]))
    return found


def test_a_tap_on_a_breaker_shows_its_state_and_counts(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    found = _breaker_facts(page, dashboard, lambda node: page.touchscreen.tap(*_centre(node)))
    assert (found["failures"], found["successes"]) == (2, 1)
    shot(page, "breaker")


def test_a_click_on_a_breaker_shows_its_state_and_counts(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    found = _breaker_facts(page, dashboard, lambda node: node.click())
    assert (found["failures"], found["successes"]) == (2, 1)


# Turn two fingers on a group: its strategy switched in the running configuration -----


def _strategy(page: Any, dashboard: Dashboard) -> str:
    programs = dashboard.app.state.supervision.programs
    plan = next(g for g in programs.plans if g.name == "crawl")
    group = programs.groups["crawl"]
    # The running configuration and the running supervisor say the same.
    assert group.supervisor.spec.strategy == plan.strategy
    return str(plan.strategy.value)


def test_two_fingers_turned_on_a_group_switch_its_strategy_and_say_where_it_is_saved(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    group = on_canvas(page, '[data-node="programs/crawl"]')
    x, y = _centre(group)
    start = _view(page)
    fingers = Fingers(page)
    fingers.down((x - 40, y), (x + 40, y))
    for degrees in (20, 40, 60, 80, 90):
        dx = 40 * math.cos(math.radians(degrees))
        dy = 40 * math.sin(math.radians(degrees))
        fingers.move((x - dx, y - dy), (x + dx, y + dy))
    fingers.up()
    expect(page.locator("#sup-answer")).to_have_text(
        re.compile(r"^group crawl is one-for-all now: saved to the running configuration")
    )
    assert _strategy(page, dashboard) == "one_for_all"
    expect(group).to_have_attribute("aria-label", re.compile(r"^crawl: supervisor, one-for-all"))
    assert _view(page)["scale"] == start["scale"]
    shot(page, "rotate-strategy")


def test_s_on_a_group_switches_its_strategy_and_back(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, '[data-node="programs/crawl"]').focus()
    page.keyboard.press("s")
    expect(page.locator("#sup-answer")).to_have_text(re.compile(r"one-for-all now: saved"))
    assert _strategy(page, dashboard) == "one_for_all"
    group = page.locator(f'{CANVAS} .sn[data-node="programs/crawl"]')
    expect(group).to_have_attribute("aria-label", re.compile(r"^crawl: supervisor, one-for-all"))
    group.focus()
    page.keyboard.press("s")
    expect(page.locator("#sup-answer")).to_have_text(re.compile(r"one-for-one now: saved"))
    assert _strategy(page, dashboard) == "one_for_one"


# A flick on the canvas: the view glides on ------------------------------------------


def _rests(page: Any) -> None:
    expect(page.locator(CANVAS)).to_have_attribute("data-coasting", "false")


def test_a_flick_on_the_canvas_pans_on_with_inertia(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    start = _view(page)
    box = page.locator(CANVAS).bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] - 20, box["y"] + box["height"] - 20
    Fingers(page).swipe((x, y), (x - 100, y - 100), ms=100)
    _rests(page)
    moved = _view(page)
    # Past where the finger let go, in the direction it went.
    assert moved["x"] - start["x"] < -110
    assert moved["y"] - start["y"] < -110
    shot(page, "inertia")


def test_shift_and_an_arrow_glide_the_view_with_inertia(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, '[data-node="programs"]').focus()
    start = _view(page)
    page.keyboard.press("Shift+ArrowLeft")
    _rests(page)
    moved = _view(page)
    assert moved["x"] - start["x"] > 40
    assert moved["y"] == start["y"]


# Pinch a tree into one shell with a composite badge; spread it open --------------------

TONES = {"running": "ok", "closed": "ok", "healthy": "ok", "restarting": "warn"}
TONES |= {"half-open": "warn", "degraded": "warn", "gave_up": "bad", "open": "bad"}
TONES |= {"unhealthy": "bad"}


def _badge(page: Any, dashboard: Dashboard) -> str:
    """The badge the server's tree should wear: everything under it, counted by tone."""
    found = canvas_json(page, dashboard)
    tree = next(t for t in found["trees"] if t["id"] == "server")
    under = {tree["id"], *(c["id"] for c in tree["children"])}
    states = [c["state"] for c in tree["children"]]
    states += [b["state"] for b in found["breakers"] if b["node"] in under]
    states += [h["status"] for h in found["health"] if h["node"] in under]
    tones = [TONES.get(state, "off") for state in states]
    parts = [f"{tones.count(t)} {t}" for t in ("ok", "warn", "bad", "off") if t in tones]
    return f"{len(tones)} inside: {', '.join(parts)}"


def _shelled(page: Any, dashboard: Dashboard) -> None:
    tree = page.locator(f'{CANVAS} .sn[data-node="server"]')
    expect(tree).to_have_class(re.compile(r"\bshell\b"))
    expect(tree).to_have_attribute("data-badge", _badge(page, dashboard))
    expect(page.locator(f'{CANVAS} .sn[data-node^="server/"]')).to_have_count(0)


def test_a_pinch_on_a_tree_closes_it_into_a_shell_and_a_spread_opens_it(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    tree = on_canvas(page, '[data-node="server"]')
    start = _view(page)
    x, y = _centre(tree)
    fingers = Fingers(page)
    fingers.down((x - 80, y), (x + 80, y))
    for gap in (60, 40, 25, 15):
        fingers.move((x - gap, y), (x + gap, y))
    fingers.up()
    _shelled(page, dashboard)
    assert _view(page)["scale"] == start["scale"]
    shot(page, "shell")
    x, y = _centre(tree)
    fingers.down((x - 15, y), (x + 15, y))
    for gap in (30, 50, 70, 90):
        fingers.move((x - gap, y), (x + gap, y))
    fingers.up()
    expect(tree).not_to_have_class(re.compile(r"\bshell\b"))
    expect(page.locator(f'{CANVAS} .sn[data-node^="server/"]').first).to_be_attached()


def test_c_on_a_tree_closes_it_into_a_shell_and_opens_it_again(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, '[data-node="server"]')
    page.keyboard.press("c")
    _shelled(page, dashboard)
    page.keyboard.press("c")
    expect(page.locator(f'{CANVAS} .sn[data-node="server"]')).not_to_have_class(
        re.compile(r"\bshell\b")
    )
    expect(page.locator(f'{CANVAS} .sn[data-node^="server/"]').first).to_be_attached()


# Double-tap a half-open breaker: its one probe sent -----------------------------------


def _due(dashboard: Dashboard) -> CircuitBreaker:
    """The webhook channel's breaker opened by three failures, then as long ago as its reset
    timeout: the next call through it is its one probe."""
    breaker: CircuitBreaker = dashboard.app.state.supervision.breakers["notify:webhook"]
    for _ in range(3):
        with pytest.raises(RuntimeError):
            breaker.call(_fail)
    opened = breaker.store.load(breaker.name)
    assert opened.state is CircuitState.OPEN
    assert opened.opened_at is not None
    earlier = dataclasses.replace(opened, opened_at=opened.opened_at - breaker.reset_timeout_s)
    assert breaker.store.compare_and_set(breaker.name, opened, earlier) is not None
    return breaker


def _probed(page: Any, dashboard: Dashboard, hook: Recorder, breaker: CircuitBreaker) -> None:
    expect(page.locator("#sup-answer")).to_have_text(
        "the probe passed (a test card posted to webhook): breaker notify:webhook is closed"
    )
    assert breaker.state is CircuitState.CLOSED
    assert [r.path for r in hook.requests] == ["/hook"]
    assert "test card" in hook.requests[0].json()["text"]
    found = next(b for b in canvas_json(page, dashboard)["breakers"] if b["name"] == breaker.name)
    assert (found["state"], found["probe_in_s"]) == ("closed", None)
    node = page.locator(f'{CANVAS} .sn[data-name="{breaker.name}"]')
    expect(node).to_have_attribute("data-state", "closed")


def test_a_double_tap_on_a_half_open_breaker_sends_its_one_probe(
    probed: tuple[Dashboard, Recorder], browser: Any, contexts: list[Any]
) -> None:
    dashboard, hook = probed
    breaker = _due(dashboard)
    page = open_canvas(dashboard, browser, contexts, phone=True)
    node = on_canvas(page, '[data-name="notify:webhook"]')
    expect(node).to_have_attribute("data-state", "half-open")
    assert hook.requests == []
    double_tap(page, _centre(node))
    _probed(page, dashboard, hook, breaker)
    shot(page, "breaker-probe")


def test_shift_f10_on_a_half_open_breaker_sends_its_one_probe(
    probed: tuple[Dashboard, Recorder], browser: Any, contexts: list[Any]
) -> None:
    dashboard, hook = probed
    breaker = _due(dashboard)
    page = open_canvas(dashboard, browser, contexts, phone=False)
    expect(on_canvas(page, '[data-name="notify:webhook"]')).to_have_attribute(
        "data-state", "half-open"
    )
    page.keyboard.press("Shift+F10")
    sheet = page.locator("#sup-sheet")
    sheet.get_by_role("button", name="Send one probe").click()
    sheet.get_by_role("button", name="Yes, probe").click()
    _probed(page, dashboard, hook, breaker)


# Drag program chips into a group and tap Build ------------------------------------------


def _built(page: Any, dashboard: Dashboard) -> None:
    expect(page.locator("#sup-answer")).to_have_text(
        "group group-1 built of indexer, mailer (one-for-one): saved to the running "
        "configuration; watchkeeper.toml is unchanged"
    )
    programs = dashboard.app.state.supervision.programs
    plan = next(g for g in programs.plans if g.name == "group-1")
    assert (plan.declared, [p.name for p in plan.programs]) == (True, ["indexer", "mailer"])
    for name in ("indexer", "mailer"):
        wait_for(lambda n=name: program_state(dashboard, n) == "running", what=f"{name} runs")
    found = canvas_json(page, dashboard)
    tree = next(t for t in found["trees"] if t["id"] == "programs")
    group = next(c for c in tree["children"] if c["id"] == "programs/group-1")
    assert [c["id"] for c in group["children"]] == [
        "programs/group-1/indexer",
        "programs/group-1/mailer",
    ]
    expect(page.locator(f'{CANVAS} .sn[data-node="programs/group-1"]')).to_be_attached()


def _drag(page: Any, name: str) -> None:
    """One finger takes the chip ``name`` into the new group."""
    drop = page.locator("#sup-extra .sup-drop")
    drop.scroll_into_view_if_needed()
    start = _centre(page.locator(f'#sup-extra .sup-chip[data-program="{name}"]'))
    end = _centre(drop)
    fingers = Fingers(page)
    fingers.down(start)
    for step in range(1, 11):
        x = start[0] + (end[0] - start[0]) * step / 10
        y = start[1] + (end[1] - start[1]) * step / 10
        fingers.move((x, y), after_s=0.05)
    fingers.up()
    expect(drop.locator(f'.sup-chip[data-program="{name}"]')).to_be_visible()


def test_program_chips_dragged_into_a_group_and_build_make_the_group(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    page.touchscreen.tap(*_centre(on_canvas(page, '[data-node="programs"]')))
    expect(page.locator("#sup-extra .sup-chip")).to_have_count(2)
    build = page.locator("#sup-extra").get_by_role("button", name="Build")
    expect(build).to_be_disabled()
    _drag(page, "indexer")
    _drag(page, "mailer")
    shot(page, "build-group")
    expect(build).to_be_enabled()
    build.scroll_into_view_if_needed()
    page.touchscreen.tap(*_centre(build))
    _built(page, dashboard)


def test_enter_on_program_chips_then_build_make_the_group(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, '[data-node="programs"]')
    page.keyboard.press("Enter")
    for name in ("indexer", "mailer"):
        chip = page.locator(f'#sup-extra .sup-chip[data-program="{name}"]')
        chip.focus()
        page.keyboard.press("Enter")
        expect(chip).to_have_attribute("aria-pressed", "true")
    build = page.locator("#sup-extra").get_by_role("button", name="Build")
    build.focus()
    page.keyboard.press("Enter")
    _built(page, dashboard)
