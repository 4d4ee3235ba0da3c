"""The canvas's programs: an edge drawn from a program to a supervisor routes its notices.

The group ``crawl`` sends its programs' notices to a Slack channel; ``indexer`` and
``mailer`` run alone, their notices going to the ops channels. Each test reads the answer
the page shows and the route the server holds afterwards: the program as the canvas reads
it, and its run's origin in the store, which is where the router looks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from watchkeeper.store.tokens import Role

from .conftest import WAIT_MS, Dashboard
from .test_canvas_support import (
    CANVAS,
    GROUPS,
    Fingers,
    canvas_json,
    fact,
    on_canvas,
    open_canvas,
    serving,
    shot,
)
from .test_canvas_touch import _centre, _view
from .world import DESKTOP

CHANNEL = "slack:C0PROGRAMS"
SAVED = (
    "saved to the running configuration; watchkeeper.toml still says what it said, so a "
    "restart of the server goes back to it"
)


@pytest.fixture
def routed(tmp_path: Path, sqlite_template: Path) -> Iterator[Dashboard]:
    """The served app, its group ``crawl`` routing to a Slack channel."""
    groups = {"crawl": {**GROUPS["crawl"], "notify": CHANNEL}}
    with serving(tmp_path, sqlite_template, sweeps=False, groups=groups) as served:
        yield served


def _program(page: Any, dashboard: Dashboard, name: str) -> dict[str, Any]:
    """The program's node as the server answers the canvas now."""
    tree = next(t for t in canvas_json(page, dashboard)["trees"] if t["id"] == "programs")
    found: dict[str, Any] = next(c for c in tree["children"] if c["name"] == name)
    return found


def _origin(dashboard: Dashboard, name: str) -> dict[str, str] | None:
    """Where the router sends the program's cards: its run's origin (``None``: ops)."""
    host = dashboard.app.state.supervision.programs.host
    origin: dict[str, str] | None = dashboard.runtime.store.runs.get(
        "program", f"{name}@{host}"
    ).origin
    return origin


def _routed_to_crawl(page: Any, dashboard: Dashboard, name: str) -> None:
    expect(page.locator("#sup-answer")).to_have_text(
        f"{name}'s notices go to {CHANNEL} now (group crawl's place): {SAVED}"
    )
    expect(fact(page, "Notices")).to_have_text(f"{CHANNEL} (its own notify)")
    assert _program(page, dashboard, name)["notify"] == {"to": CHANNEL, "set_by": "program"}
    assert _origin(dashboard, name) == {"platform": "slack", "chat_id": "C0PROGRAMS"}


def _drag(page: Any, start: tuple[float, float], end: tuple[float, float]) -> Fingers:
    """One finger down on ``start`` and moved to ``end``, still down."""
    fingers = Fingers(page)
    fingers.down(start)
    for step in range(1, 11):
        x = start[0] + (end[0] - start[0]) * step / 10
        y = start[1] + (end[1] - start[1]) * step / 10
        fingers.move((x, y), after_s=0.03)
    return fingers


def test_an_edge_drawn_from_a_program_to_a_group_routes_its_notices_there(
    routed: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    dashboard = routed
    page = open_canvas(dashboard, browser, contexts, phone=True)
    mailer = on_canvas(page, '[data-node="programs/mailer"]')
    indexer = on_canvas(page, '[data-node="programs/indexer"]')
    # Brought into view last, at the top: the programs below it are in view too.
    group = on_canvas(page, '[data-node="programs/crawl"]')
    expect(page.locator(f"{CANVAS} path.sup-band")).to_have_count(0)
    assert _program(page, dashboard, "mailer")["notify"] == {"to": "ops", "set_by": "default"}
    start = _view(page)
    # Let go on no supervisor: the edge eases back and nothing is routed.
    box = page.locator(CANVAS).bounding_box()
    assert box is not None
    fingers = _drag(page, _centre(indexer), (box["x"] + box["width"] - 10, _centre(indexer)[1]))
    expect(page.locator(f"{CANVAS} path.sup-band")).to_have_count(1)
    fingers.up()
    expect(page.locator(CANVAS)).to_have_attribute("data-edge", "")
    expect(page.locator(f"{CANVAS} path.sup-band")).to_have_count(0)
    expect(page.locator("#sup-answer")).to_have_text("")
    assert _program(page, dashboard, "indexer")["notify"] == {"to": "ops", "set_by": "default"}
    # Let go on the group: the edge over it, then the notices routed.
    fingers = _drag(page, _centre(mailer), _centre(group))
    band = page.locator(f"{CANVAS} path.sup-band")
    expect(band).to_have_class(re.compile(r"\bok\b"))
    expect(group).to_have_class(re.compile(r"\bdrop\b"))
    shot(page, "route-notices")
    fingers.up()
    _routed_to_crawl(page, dashboard, "mailer")
    expect(band).to_have_count(0)
    # A drag that starts on a program draws; it never moves the view.
    assert _view(page) == start


def _viewer_is_not_offered_it(dashboard: Dashboard, browser: Any, contexts: list[Any]) -> None:
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(WAIT_MS)
    contexts.append(context)
    page = dashboard.login(context.new_page(), "vic", Role.VIEWER)
    page.goto(f"{dashboard.url}/web/supervision")
    on_canvas(page, '[data-node="programs/indexer"]')
    page.keyboard.press("Enter")
    expect(fact(page, "Notices")).to_have_text("the ops channels (its own notify)")
    expect(
        page.locator("#sup-extra").get_by_role("button", name="Route notices to…")
    ).to_have_count(0)
    page.keyboard.press("n")
    expect(page.locator("#sup-answer")).to_have_text(
        "Only admins route a program's notices: this session is a viewer's."
    )


def test_n_on_a_program_lists_the_supervisors_and_routes_its_notices(
    routed: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    dashboard = routed
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, '[data-node="programs/indexer"]')
    page.keyboard.press("n")
    choices = page.locator("#sup-extra .sup-route").get_by_role("button")
    expect(choices).to_have_text(
        [re.compile(r"^The ops channels \(.+\)$"), f"Group crawl: {CHANNEL}"]
    )
    expect(choices.first).to_be_focused()
    page.keyboard.press("Tab")
    expect(choices.nth(1)).to_be_focused()
    page.keyboard.press("Enter")
    _routed_to_crawl(page, dashboard, "indexer")
    # The panel's own control, from the keyboard: back to the ops channels.
    route = page.locator("#sup-extra").get_by_role("button", name="Route notices to…")
    route.focus()
    page.keyboard.press("Enter")
    expect(route).to_have_attribute("aria-expanded", "true")
    choices.first.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#sup-answer")).to_have_text(
        re.compile(rf"^indexer's notices go to the ops channels \(.*\) now: {re.escape(SAVED)}$")
    )
    expect(fact(page, "Notices")).to_have_text("the ops channels (its own notify)")
    assert _program(page, dashboard, "indexer")["notify"] == {"to": "ops", "set_by": "program"}
    assert _origin(dashboard, "indexer") is None
    _viewer_is_not_offered_it(dashboard, browser, contexts)
