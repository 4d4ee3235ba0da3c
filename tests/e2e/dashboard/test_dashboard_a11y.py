"""Accessibility: axe finds nothing serious on any page, in either size or theme; the
keyboard reaches the content first and closes what it opened."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .world import DESKTOP, PHONE, World, logged_in, world

__all__ = ["world"]

SERIOUS = {"serious", "critical"}


def _serious(page: Any) -> list[str]:
    """axe-core's serious and critical violations on the page, one line per node."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page).response["violations"]
    return [
        f"{page.url}: {v['id']} ({v['impact']}): {node['target']} {node['failureSummary']}"
        for v in found
        if v["impact"] in SERIOUS
        for node in v["nodes"]
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_axe_finds_no_serious_violation_on_any_page(
    browser: Any, world: World, size: str, scheme: str
) -> None:
    viewport = DESKTOP if size == "desktop" else PHONE
    context = browser.new_context(viewport=viewport, color_scheme=scheme)
    login = context.new_page()
    login.goto(f"{world.dashboard.url}/web/login")
    expect(login.get_by_role("button", name="Log in")).to_be_visible()
    problems = _serious(login)
    context.close()

    page = logged_in(browser, world, viewport, color_scheme=scheme)
    for path in world.paths.values():
        page.goto(world.dashboard.url + path)
        expect(page.locator("main h1").first).to_be_visible()
        problems += _serious(page)
    # The bell's list, opened.
    page.goto(f"{world.dashboard.url}/web/")
    page.locator(".bell summary").click()
    expect(page.locator(".bell-list")).to_be_visible()
    problems += _serious(page)
    page.context.close()
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_scrolling_log_or_output_is_reached_by_keyboard_and_named(
    browser: Any, world: World, size: str
) -> None:
    page = logged_in(browser, world, DESKTOP if size == "desktop" else PHONE)
    boxes = {
        "process log": "#log",
        "job": "pre[data-task-output]",
        "task": "#task-output",
    }
    problems: list[str] = []
    for name, selector in boxes.items():
        page.goto(world.dashboard.url + world.paths[name])
        box = page.locator(selector)
        expect(box).to_contain_text("line" if name == "process log" else "step 119")
        assert box.evaluate("(e) => e.scrollHeight > e.clientHeight"), f"{name} does not scroll"
        expect(box).to_have_attribute("tabindex", "0")
        expect(box).to_have_accessible_name(re.compile(r"\S"))
        box.focus()
        expect(box).to_be_focused()
        problems += _serious(page)
    page.context.close()
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_api_docs_say_their_language_and_axe_finds_nothing_serious(
    browser: Any, world: World, size: str, scheme: str
) -> None:
    viewport = DESKTOP if size == "desktop" else PHONE
    context = browser.new_context(viewport=viewport, color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{world.dashboard.url}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("watchkeeper")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    problems = _serious(page)
    context.close()
    assert problems == [], "\n".join(problems)


def test_the_dark_theme_follows_the_system_setting(browser: Any, world: World) -> None:
    background = "() => getComputedStyle(document.body).backgroundColor"
    light = logged_in(browser, world, DESKTOP, color_scheme="light")
    dark = logged_in(browser, world, DESKTOP, color_scheme="dark")
    lit = light.evaluate(background)
    darkened = dark.evaluate(background)
    assert lit != darkened
    channels = [int(c) for c in re.findall(r"\d+", darkened)[:3]]
    assert sum(channels) < 3 * 64, darkened
    light.context.close()
    dark.context.close()


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_skip_link_comes_first_and_moves_focus_to_the_content(
    browser: Any, world: World, size: str
) -> None:
    page = logged_in(browser, world, DESKTOP if size == "desktop" else PHONE)
    page.goto(f"{world.dashboard.url}/web/jobs")
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    # The next Tab goes into the content, past the navigation.
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.querySelector('main').contains(document.activeElement)")
    page.context.close()


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_bell_opens_with_enter_closes_on_escape_and_gives_focus_back(
    browser: Any, world: World, size: str
) -> None:
    page = logged_in(browser, world, DESKTOP if size == "desktop" else PHONE)
    page.goto(f"{world.dashboard.url}/web/")
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    bell = page.locator(".bell summary")
    expect(bell).to_have_accessible_name(re.compile(r"\d+ open incidents?"))
    bell.focus()
    page.keyboard.press("Enter")
    panel = page.locator(".bell-list")
    expect(panel).to_be_visible()
    expect(panel.get_by_role("link").first).to_be_in_viewport()
    page.keyboard.press("Tab")
    expect(panel.get_by_role("link").first).to_be_focused()
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(bell).to_be_focused()


def test_the_phone_menu_closes_on_escape_and_gives_focus_back(browser: Any, world: World) -> None:
    page = logged_in(browser, world, PHONE)
    page.goto(f"{world.dashboard.url}/web/jobs")
    menu = page.get_by_role("button", name="Menu")
    menu.focus()
    page.keyboard.press("Enter")
    jobs = page.get_by_role("navigation", name="Dashboard").get_by_role("link", name="Jobs")
    expect(jobs).to_be_visible()
    expect(jobs).to_have_attribute("aria-current", "page")
    page.keyboard.press("Escape")
    expect(jobs).to_be_hidden()
    expect(menu).to_be_focused()
    expect(menu).to_have_attribute("aria-expanded", "false")
    page.context.close()
