"""Every list page follows the event stream, and says when the stream is lost and back."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.queue.service import QueueService
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import create_app
from watchkeeper.server.web import stream
from watchkeeper.store.tokens import Role
from watchkeeper.watch.silences import Matchers

from ...support.live_server import free_port
from .conftest import LOOK_CORNERS, Dashboard, open_runtime, serve

#: Set on a page once it is drawn: still there later means the page was not loaded again.
MARK = "() => { window.drawnOnce = true; }"
MARKED = "() => window.drawnOnce === true"


def _queue(runtime: Runtime) -> QueueService:
    return QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})


def _submit(queue: QueueService, title: str, fleet: str = "gpu") -> str:
    job = queue.submit(
        title, org="acme", fleet=fleet, payload={"argv": ["true"]}, submitted_by="ci"
    )
    return job.id


def _listening(page: Any) -> None:
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    page.evaluate(MARK)


def test_the_jobs_list_shows_new_jobs_status_changes_and_deletions_live(
    dashboard: Dashboard, pages: Any
) -> None:
    queue = _queue(dashboard.runtime)
    first = _submit(queue, "build the docs")
    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/jobs")
    expect(page.locator("tr.job")).to_have_count(1)
    _listening(page)

    second = _submit(queue, "train the model")
    row = page.locator(f'tr[data-job-id="{second}"]')
    expect(row).to_contain_text("train the model")
    expect(page.locator("tr.job")).to_have_count(2)

    queue.cancel(first)
    cancelled = page.locator(f'tr[data-job-id="{first}"]')
    expect(cancelled.locator(".badge")).to_have_text("cancelled")
    expect(cancelled.get_by_role("button")).to_have_text(["Retry", "Delete"])

    queue.delete(first)
    expect(cancelled).to_have_count(0)
    expect(page.locator("tr.job")).to_have_count(1)
    assert page.evaluate(MARKED)

    # A job's own page: its buttons follow its state too.
    page.goto(f"{dashboard.url}/web/jobs/{second}")
    actions = page.locator("#job-actions")
    expect(actions.get_by_role("button")).to_have_text(["Cancel", "Delete"])
    _listening(page)
    queue.cancel(second)
    expect(actions.get_by_role("button")).to_have_text(["Retry", "Delete"])
    assert page.evaluate(MARKED)
    page.once("dialog", lambda dialog: dialog.accept())
    actions.get_by_role("button", name="Delete").click()
    expect(page.locator("#answers")).to_contain_text(f"job {second} deleted")
    expect(actions.get_by_role("button")).to_have_count(0)


def test_processes_silences_and_switches_follow_live(
    dashboard: Dashboard, pages: Any, tmp_path: Path
) -> None:
    runtime = dashboard.runtime
    page = dashboard.login(pages(), "ana")

    page.goto(f"{dashboard.url}/web/procs")
    _listening(page)
    request = LaunchRequest(("sleep", "120"), cwd=str(tmp_path), name="long sleep", detach=True)
    run_id = runtime.procs.start(request).run.run_id
    try:
        row = page.locator(f'tr[data-proc="{run_id}"]')
        expect(row).to_contain_text("long sleep")
        expect(row.locator(".badge")).to_have_text(re.compile(r"starting|running"))
    finally:
        runtime.procs.abort(run_id, grace_s=0)
    expect(row.locator(".badge")).not_to_have_text(re.compile(r"starting|running"))
    assert page.evaluate(MARKED)

    page.goto(f"{dashboard.url}/web/silences")
    _listening(page)
    matchers = Matchers("crawl", None, "nightly *", "glob", None)
    made = runtime.silences.add(matchers, "1h", "maintenance", "@ben", "api")
    silence = page.locator("#silences-list tr", has_text="maintenance")
    expect(silence).to_contain_text("active")
    expect(silence.get_by_role("button", name="Expire")).to_be_visible()
    runtime.silences.expire(made.id, "@ben")
    expect(silence).to_contain_text("expired")
    expect(silence.get_by_role("button", name="Expire")).to_have_count(0)
    assert page.evaluate(MARKED)

    page.goto(f"{dashboard.url}/web/")
    _listening(page)
    switch = page.locator('tr[data-runbook="retry_failed_without_effects"] .badge')
    before = switch.inner_text()
    runtime.incidents.switch_runbook("retry_failed_without_effects", before == "off", "@ben")
    expect(switch).to_have_text("on" if before == "off" else "off")
    assert page.evaluate(MARKED)


@pytest.mark.parametrize("look", LOOK_CORNERS, indirect=True)
def test_a_lost_connection_says_so_and_the_page_catches_up_when_it_is_back(
    tmp_path: Path, sqlite_template: Path, pages: Any
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(sqlite_template, data / "watchkeeper.db")
    runtime = open_runtime(data)
    port = free_port()
    try:
        queue = _queue(runtime)
        kept = _submit(queue, "build the docs")
        app = create_app(runtime, run_sweeper=False)
        with serve(app, port) as url:
            page = Dashboard(url, runtime, app).login(pages(), "ana")
            page.goto(f"{url}/web/jobs")
            expect(page.locator("tr.job")).to_have_count(1)
            _listening(page)

        # The words docs/dashboard.md promises.
        notice = page.get_by_role("status").filter(has_text="Live updates paused, reconnecting…")
        expect(notice).to_be_visible()
        expect(page.locator("body")).not_to_have_attribute("data-stream", "open")
        # Work moves while the server is away.
        added = _submit(queue, "train the model")
        queue.cancel(kept)

        with serve(create_app(runtime, run_sweeper=False), port):
            back = page.get_by_role("status").filter(has_text="Connection back")
            expect(back).to_be_visible(timeout=45_000)
            expect(page.locator("body")).to_have_attribute("data-stream", "open")
            expect(page.get_by_text("Live updates paused")).to_have_count(0)
            expect(page.locator(f'tr[data-job-id="{added}"]')).to_contain_text("train the model")
            expect(page.locator(f'tr[data-job-id="{kept}"] .badge')).to_have_text("cancelled")
            assert page.evaluate(MARKED)
            expect(page.locator("#live-notice")).to_be_hidden()
    finally:
        runtime.close()


def _revoke(dashboard: Dashboard, name: str) -> None:
    runtime = dashboard.runtime
    token = next(t for t in runtime.store.tokens.list() if t.name == name)
    runtime.store.tokens.revoke(token.id, runtime.clock())
    # Another process's revocation is read within CACHE_S; forget to read it at once.
    runtime.sessions.forget()


@pytest.mark.parametrize("look", LOOK_CORNERS, indirect=True)
def test_a_revoked_session_says_to_log_in_again_as_soon_as_it_is_refused(
    dashboard: Dashboard, pages: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event stream's next connect (within its lifetime) or a live part's next fetch is
    refused: the page says so then, never "paused" while it cannot mend."""
    # Streams of 3 s instead of 15: the reconnect this waits for comes sooner, nothing else.
    monkeypatch.setattr(stream, "STREAM_S", 3.0)
    quiet = dashboard.login(pages(), "rita", Role.VIEWER)
    quiet.goto(f"{dashboard.url}/web/silences")
    _listening(quiet)
    busy = dashboard.login(pages(), "rita", Role.VIEWER)
    busy.goto(f"{dashboard.url}/web/jobs")
    _listening(busy)
    _revoke(dashboard, "rita")

    # A fetch: a job comes, the jobs list is fetched again and refused, long before the
    # stream ends.
    _submit(_queue(dashboard.runtime), "train the model")
    notice = busy.get_by_role("status").filter(has_text="log in again")
    expect(notice).to_be_visible(timeout=10_000)
    expect(busy.locator("body")).to_have_attribute("data-stream", "ended")
    expect(busy.locator("#jobs-list")).not_to_contain_text("Log in")

    # The stream: nothing moves on this page, and its reconnect is refused.
    notice = quiet.get_by_role("status").filter(has_text="log in again")
    expect(notice).to_be_visible(timeout=20_000)
    expect(quiet.locator("body")).to_have_attribute("data-stream", "ended")
    for page in (quiet, busy):
        expect(page.get_by_text("Live updates paused")).to_have_count(0)
        assert page.evaluate(MARKED)
