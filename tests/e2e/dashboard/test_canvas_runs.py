"""The canvas's run cards: started, probed, aborted, reclaimed, read."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
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
    launch,
    on_canvas,
    open_canvas,
    run_card,
    shot,
)
from .test_canvas_touch import _centre, _view

# Tap the programs node: a new run card ----------------------------------------------------


def _new_run(page: Any, dashboard: Dashboard, press: Any) -> str:
    before = {r["id"] for r in canvas_json(page, dashboard)["runs"]}
    press(page.locator("#sup-extra").get_by_role("button", name="New run of crawler"))
    answer = page.locator("#sup-answer")
    expect(answer).to_have_text(re.compile(r"^run \S+ of crawler started$"))
    run_id = (answer.text_content() or "").split()[1]
    assert run_id not in before
    found = run_card(page, dashboard, run_id)
    assert (found["program"], found["liveness"]) == ("crawler", "live")
    expect(page.locator(f'{CANVAS} .sn[data-run="{run_id}"]')).to_have_attribute(
        "data-state", "live"
    )
    return run_id


def test_a_tap_on_the_programs_node_starts_a_run_card_with_a_fresh_id(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    page.touchscreen.tap(*_centre(on_canvas(page, '[data-node="programs"]')))
    first = _new_run(page, dashboard, lambda b: page.touchscreen.tap(*_centre(b)))
    second = _new_run(page, dashboard, lambda b: page.touchscreen.tap(*_centre(b)))
    assert first != second
    shot(page, "start-run")


def test_enter_on_the_programs_node_then_enter_on_new_run_starts_a_run_card(
    dashboard: Dashboard, browser: Any, contexts: list[Any]
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, '[data-node="programs"]').focus()
    page.keyboard.press("Enter")

    def press(button: Any) -> None:
        button.focus()
        page.keyboard.press("Enter")

    run_id = _new_run(page, dashboard, press)
    assert run_card(page, dashboard, run_id)["program"] == "crawler"


# Flick down on the programs node: every card probed again -----------------------------


def _ended_and_live(dashboard: Dashboard, tmp_path: Path, page: Any) -> tuple[str, str]:
    live = launch(dashboard, tmp_path, "sleep", "300")
    done = launch(dashboard, tmp_path, "true")
    wait_for(
        lambda: run_card(page, dashboard, done)["liveness"] == "ended", what="the short run ended"
    )
    return live, done


def test_a_flick_down_on_the_programs_node_probes_every_run_again(
    dashboard: Dashboard, browser: Any, contexts: list[Any], tmp_path: Path
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    live, done = _ended_and_live(dashboard, tmp_path, page)
    node = on_canvas(page, '[data-node="programs"]')
    start = _view(page)
    x, y = _centre(node)
    Fingers(page).swipe((x, y), (x, y + 150), ms=120)
    expect(page.locator(CANVAS)).to_have_attribute("data-probed", "1")
    expect(page.locator("#sup-answer")).to_have_text(re.compile(r"^Runs probed: \d+ live"))
    for run_id, liveness in ((live, "live"), (done, "ended")):
        assert run_card(page, dashboard, run_id)["liveness"] == liveness
        card = page.locator(f'{CANVAS} .sn[data-run="{run_id}"]')
        expect(card).to_have_attribute("data-state", liveness)
    expect(page.locator(f'{CANVAS} .sn[data-run="{live}"]')).to_have_class(re.compile(r"\bpulse\b"))
    expect(page.locator(f'{CANVAS} .sn[data-run="{done}"]')).to_have_class(re.compile(r"\boff\b"))
    # The flick was the node's: the view did not move with it.
    assert _view(page) == start
    shot(page, "refresh-runs")


def test_r_on_a_node_probes_every_run_again(
    dashboard: Dashboard, browser: Any, contexts: list[Any], tmp_path: Path
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    live, done = _ended_and_live(dashboard, tmp_path, page)
    on_canvas(page, '[data-node="programs"]').focus()
    page.keyboard.press("r")
    expect(page.locator(CANVAS)).to_have_attribute("data-probed", "1")
    expect(page.locator(f'{CANVAS} .sn[data-run="{done}"]')).to_have_attribute(
        "data-state", "ended"
    )
    expect(page.locator(f'{CANVAS} .sn[data-run="{live}"]')).to_have_attribute("data-state", "live")


# Long-press a run card: Abort, with the ownership check first -------------------------


def _abort(page: Any, dashboard: Dashboard, run_id: str, press: Any) -> None:
    sheet = page.locator("#sup-sheet")
    owner = run_card(page, dashboard, run_id)
    assert owner["ownership"] == "ours"
    expect(sheet.locator(".sup-note")).to_have_text(
        re.compile(rf"^Ownership check: its owner \(pid {owner['owner_pid']}\) is the process")
    )
    press(sheet.get_by_role("button", name="Abort"))
    press(sheet.get_by_role("button", name="Yes, abort"))
    wait_for(
        lambda: run_card(page, dashboard, run_id)["status"] == "cancelled", what=f"{run_id} aborted"
    )
    expect(page.locator("#sup-answer")).to_have_text(re.compile(r"^signaled: "))
    expect(page.locator(f'{CANVAS} .sn[data-run="{run_id}"]')).to_have_attribute(
        "data-state", "ended"
    )


def test_a_long_press_on_a_run_card_shows_the_ownership_check_then_aborts(
    dashboard: Dashboard, browser: Any, contexts: list[Any], tmp_path: Path
) -> None:
    run_id = launch(dashboard, tmp_path, "sleep", "300")
    page = open_canvas(dashboard, browser, contexts, phone=True)
    card = on_canvas(page, f'[data-run="{run_id}"]')
    fingers = Fingers(page)
    fingers.down(_centre(card))
    expect(page.locator("#sup-sheet")).to_be_visible()
    fingers.up()
    shot(page, "abort-run")
    _abort(page, dashboard, run_id, lambda b: page.touchscreen.tap(*_centre(b)))


def test_shift_f10_on_a_run_card_shows_the_ownership_check_then_aborts(
    dashboard: Dashboard, browser: Any, contexts: list[Any], tmp_path: Path
) -> None:
    run_id = launch(dashboard, tmp_path, "sleep", "300")
    page = open_canvas(dashboard, browser, contexts, phone=False)
    on_canvas(page, f'[data-run="{run_id}"]').focus()
    page.keyboard.press("Shift+F10")

    def press(button: Any) -> None:
        expect(button).to_be_visible()
        button.focus()
        page.keyboard.press("Enter")

    _abort(page, dashboard, run_id, press)


# Flick a stale ghost card away: the run reclaimed -----------------------------------


def _stale(dashboard: Dashboard, tmp_path: Path, page: Any) -> str:
    """A run whose owner died without a word: its shim and its command killed at once."""
    run_id = launch(dashboard, tmp_path, "sleep", "300")
    run = wait_for(
        lambda: (found := dashboard.runtime.procs.get(run_id)).pgid and found,
        what="the run's processes recorded",
    )
    assert run.shim_pid is not None and run.pgid is not None
    os.kill(run.shim_pid, signal.SIGKILL)
    os.killpg(run.pgid, signal.SIGKILL)
    wait_for(lambda: run_card(page, dashboard, run_id)["liveness"] == "stale", what="the run stale")
    return run_id


def _reclaimed(page: Any, dashboard: Dashboard, run_id: str) -> None:
    expect(page.locator("#sup-answer")).to_have_text(re.compile(rf"^run {run_id} reclaimed: "))
    found = run_card(page, dashboard, run_id)
    assert found["liveness"] == "ended"
    assert dashboard.runtime.procs.get(run_id).status.ended
    expect(page.locator(f'{CANVAS} .sn[data-run="{run_id}"]')).to_have_attribute(
        "data-state", "ended"
    )


def test_a_stale_ghost_card_flicked_away_is_reclaimed(
    unswept: Dashboard, browser: Any, contexts: list[Any], tmp_path: Path
) -> None:
    page = open_canvas(unswept, browser, contexts, phone=True)
    run_id = _stale(unswept, tmp_path, page)
    page.reload()
    card = on_canvas(page, f'[data-run="{run_id}"]')
    expect(card).to_have_class(re.compile(r"\bghost\b"))
    shot(page, "reclaim-stale")
    x, y = _centre(card)
    Fingers(page).swipe((x, y), (x + 150, y), ms=120)
    _reclaimed(page, unswept, run_id)


def test_delete_on_a_stale_ghost_card_reclaims_it(
    unswept: Dashboard, browser: Any, contexts: list[Any], tmp_path: Path
) -> None:
    page = open_canvas(unswept, browser, contexts, phone=False)
    run_id = _stale(unswept, tmp_path, page)
    page.reload()
    on_canvas(page, f'[data-run="{run_id}"]').focus()
    page.keyboard.press("Delete")
    _reclaimed(page, unswept, run_id)
    assert unswept.runtime.procs.get(run_id).status.ended


# Tap a run card: has it ended, may it be cleaned up ------------------------------------


def _ended_facts(page: Any, dashboard: Dashboard, press: Any, live: str, done: str) -> None:
    page.reload()
    press(on_canvas(page, f'[data-run="{done}"]'))
    expect(fact(page, "Run")).to_have_text(done)
    # Exited (its witness not read yet) or settled: ended either way, as the server says.
    status = run_card(page, dashboard, done)["status"]
    expect(fact(page, "Ended")).to_have_text(re.compile(rf"^yes, {status} \("))
    expect(fact(page, "Clean up")).to_have_text("yes: nothing of it runs")
    page.locator("#sup-close").click()
    press(on_canvas(page, f'[data-run="{live}"]'))
    expect(fact(page, "Run")).to_have_text(live)
    expect(fact(page, "Ended")).to_have_text("no, it runs")
    expect(fact(page, "Clean up")).to_have_text("not yet: it runs; abort it first")


def test_a_tap_on_a_run_card_says_whether_it_ended_and_can_be_cleaned_up(
    dashboard: Dashboard, browser: Any, contexts: list[Any], tmp_path: Path
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=True)
    live, done = _ended_and_live(dashboard, tmp_path, page)
    assert run_card(page, dashboard, done)["cleanable"] is True
    assert run_card(page, dashboard, live)["cleanable"] is False
    _ended_facts(page, dashboard, lambda card: page.touchscreen.tap(*_centre(card)), live, done)
    shot(page, "run-ended")


def test_a_click_on_a_run_card_says_whether_it_ended_and_can_be_cleaned_up(
    dashboard: Dashboard, browser: Any, contexts: list[Any], tmp_path: Path
) -> None:
    page = open_canvas(dashboard, browser, contexts, phone=False)
    live, done = _ended_and_live(dashboard, tmp_path, page)
    assert run_card(page, dashboard, done)["cleanable"] is True
    _ended_facts(page, dashboard, lambda card: card.click(), live, done)
