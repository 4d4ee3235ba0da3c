"""Every dashboard page fits a phone: no sideways scroll, a navigation that fits, big targets."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .world import DESKTOP, PHONE, World, logged_in, world

__all__ = ["world"]

PAGES = [
    "home",
    "jobs",
    "job",
    "incident",
    "incidents",
    "processes",
    "process",
    "silences",
    "spend",
    "spend range",
    "task",
    "topology",
    "supervision",
    "models",
    "integrations",
    "settings",
    "onboarding",
    "not found",
]
NAV = [
    "Running work",
    "Incidents",
    "Jobs",
    "Topology",
    "Supervision",
    "Spend",
    "Processes",
    "Silences",
    "Settings",
]
#: The smallest touch target, in CSS pixels, on each side.
TARGET = 44
#: What a thumb presses: the navigation, the bell, logging out, and every button that acts.
TARGETS = "header.top a, header.top button, header.top summary, main .btn, main button"


def _too_small(page: Any) -> list[str]:
    """Every visible target smaller than TARGET on a side, as `text WxH`."""
    found: list[str] = page.evaluate(
        """([selector, least]) => [...document.querySelectorAll(selector)]
            .filter((e) => e.getClientRects().length && getComputedStyle(e).visibility !== "hidden")
            .map((e) => [e, e.getBoundingClientRect()])
            .filter(([, r]) => r.width < least || r.height < least)
            .map(([e, r]) => `${(e.textContent || e.getAttribute("aria-label") || e.tagName)
                .trim().slice(0, 30)} ${Math.round(r.width)}x${Math.round(r.height)}`)""",
        [TARGETS, TARGET],
    )
    return found


def _fits(page: Any, width: int) -> None:
    scroll = page.evaluate("() => document.documentElement.scrollWidth")
    assert scroll <= width, f"{page.url} is {scroll} px wide in a {width} px viewport"


def _open_menu(page: Any) -> Any:
    """The navigation, opened through its menu button when it has one."""
    nav = page.get_by_role("navigation", name="Dashboard")
    menu = page.get_by_role("button", name="Menu")
    if menu.count() and menu.is_visible():
        expect(menu).to_have_attribute("aria-expanded", "false")
        menu.click()
        expect(menu).to_have_attribute("aria-expanded", "true")
    return nav


@pytest.mark.parametrize("name", PAGES)
def test_each_page_fits_a_phone_with_a_reachable_navigation_and_big_targets(
    browser: Any, world: World, name: str
) -> None:
    page = logged_in(browser, world, PHONE)
    page.goto(world.dashboard.url + world.paths[name])
    expect(page.locator("main h1").first).to_be_visible()
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    _fits(page, PHONE["width"])

    nav = _open_menu(page)
    for label in NAV:
        link = nav.get_by_role("link", name=label, exact=True)
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    expect(page.get_by_role("button", name="Log out")).to_be_in_viewport()
    _fits(page, PHONE["width"])
    assert _too_small(page) == []
    page.context.close()


def test_the_login_page_fits_a_phone(browser: Any, world: World) -> None:
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.goto(f"{world.dashboard.url}/web/login")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    _fits(page, PHONE["width"])
    assert _too_small(page) == []
    context.close()


@pytest.mark.parametrize("name", PAGES)
def test_each_page_still_renders_on_a_desktop_with_the_navigation_in_the_bar(
    browser: Any, world: World, name: str
) -> None:
    page = logged_in(browser, world, DESKTOP)
    page.goto(world.dashboard.url + world.paths[name])
    expect(page.locator("main h1").first).to_be_visible()
    _fits(page, DESKTOP["width"])
    expect(page.get_by_role("button", name="Menu")).to_be_hidden()
    nav = page.get_by_role("navigation", name="Dashboard")
    for label in NAV:
        expect(nav.get_by_role("link", name=label, exact=True)).to_be_in_viewport()
    # The navigation sits in the top bar, one line high, beside the brand.
    brand = page.locator("header.top .brand").bounding_box()
    jobs = nav.get_by_role("link", name="Jobs", exact=True).bounding_box()
    assert brand is not None and jobs is not None
    assert abs((brand["y"] + brand["height"] / 2) - (jobs["y"] + jobs["height"] / 2)) < 12
    page.context.close()


def test_an_interrupted_task_turns_the_tab_icon_red_for_the_task_switcher(
    browser: Any, world: World
) -> None:
    page = logged_in(browser, world, PHONE)
    page.goto(world.dashboard.url + world.paths["job"])
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    icon = page.locator("link[rel=icon]")
    expect(icon).to_have_count(1)
    expect(icon).not_to_have_attribute("href", re.compile("d32f2f", re.I))
    expect(page.locator('meta[name="theme-color"]').first).to_have_attribute(
        "content", re.compile(r"^#")
    )
    task_id = page.locator(".task-card .ticon").first.get_attribute("data-task-id")
    page.evaluate("id => wk.applyTaskUpdate({id, status: 'queued', interrupted: true})", task_id)
    expect(icon).to_have_attribute("href", re.compile("d32f2f", re.I))
    expect(page).to_have_title(re.compile(r"^\(!\) "))
    page.evaluate("id => wk.applyTaskUpdate({id, status: 'running', interrupted: false})", task_id)
    expect(icon).not_to_have_attribute("href", re.compile("d32f2f", re.I))
    expect(page).not_to_have_title(re.compile(r"^\(!\) "))
    page.context.close()
