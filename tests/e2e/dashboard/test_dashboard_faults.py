"""Small faults of the dashboard's pages, each seen in a real browser."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.support import patient_http
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewRunner
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.store.tokens import Role
from watchkeeper.timeline.service import TimelineService

from .conftest import Dashboard

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

#: Labels of a bar chart whose box leaves the chart's own box or the window (what shows).
CLIPPED_LABELS = """svg => {
  const box = svg.getBoundingClientRect();
  const width = document.documentElement.clientWidth;
  return [...svg.querySelectorAll("text")].filter((text) => {
    const r = text.getBoundingClientRect();
    return r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.left < 0 || r.right > width;
  }).map((text) => text.textContent);
}"""


def _spend(dashboard: Dashboard) -> None:
    runtime = dashboard.runtime
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    usage = Usage(input_tokens=300_000_000, output_tokens=20_000_000)
    priced = {"model": "coder-1", "provider": "acme-ai", "role": "implementer", "usage": usage}
    unpriced = {"model": "mystery", "provider": "elsewhere", "role": "architect"}
    events = [NewEvent(phase="implementer", **priced)]
    events += [NewEvent(phase="review", usage=Usage(input_tokens=10), **unpriced)] * 12
    timeline.ingest(events, "runner")


def test_the_spend_by_day_chart_shows_its_whole_labels_on_desktop_and_phone(
    dashboard: Dashboard, pages: Any
) -> None:
    _spend(dashboard)
    page = dashboard.login(pages(), "ana")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"{dashboard.url}/web/spend")
        chart = page.locator('svg.bars[data-by="day"]')
        # $900 + $300 for the priced call, twelve calls of a model without a price.
        expect(chart.locator("text.bar-value")).to_have_text("$1,200.0000 + 12 unpriced")
        for by in ("day", "model", "provider", "role"):
            shown = page.locator(f'svg.bars[data-by="{by}"]')
            expect(shown).to_be_visible()
            assert shown.evaluate(CLIPPED_LABELS) == [], (by, size)


def test_an_unknown_dashboard_path_answers_a_404_page_and_the_api_keeps_json(
    dashboard: Dashboard, pages: Any
) -> None:
    page = dashboard.login(pages(), "ana")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        answer = page.goto(f"{dashboard.url}/web/no-such-page?x=1")
        assert answer is not None
        assert answer.status == 404
        assert answer.headers["content-type"].startswith("text/html")
        expect(page.locator("header.top nav")).to_be_visible()  # the dashboard's own layout
        expect(page.get_by_role("heading", name="Not found")).to_be_visible()
        expect(page.locator("main")).to_contain_text("/web/no-such-page")
        home = page.locator("main").get_by_role("link", name="Running work")
        expect(home).to_have_attribute("href", "/web/")
        home.click()
        expect(page.locator("#work")).to_be_visible()

    # A job, an incident or a process run that is not there (or could not be) says so the
    # same way.
    for path in ("jobs/j-0", "jobs/not-a-job", "incidents/0", "incidents/abc", "procs/no%20run"):
        answer = page.goto(f"{dashboard.url}/web/{path}")
        assert answer is not None
        assert (answer.status, answer.headers["content-type"].split(";")[0]) == (
            404,
            "text/html",
        ), path
        expect(page.get_by_role("heading", name="Not found")).to_be_visible()
        expect(page.locator("main").get_by_role("link", name="Running work")).to_be_visible()

    token = {"Authorization": f"Bearer {dashboard.token('ana')}"}
    missing = patient_http.get(f"{dashboard.url}/api/v1/no-such-thing", headers=token)
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/json")
    assert "error" in missing.json()


def _stalled_incident(dashboard: Dashboard, page: Any, run_id: str, title: str) -> str:
    """Report a run with a one-second budget; the path of the incident it opens."""
    reporter = {"Authorization": f"Bearer {dashboard.token('reporter', Role.REPORTER)}"}
    body = {"kind": "crawl", "run_id": run_id, "title": title, "budget_s": 1, "effects": "none"}
    patient_http.post(
        f"{dashboard.url}/api/v1/runs", json=body, headers=reporter, timeout=10
    ).raise_for_status()
    page.goto(f"{dashboard.url}/web/")
    link = page.locator("#work .attention li.run", has_text=title).get_by_role(
        "link", name=re.compile(r"^incident #\d+$")
    )
    expect(link).to_be_visible()
    return str(link.get_attribute("href"))


def test_an_incident_page_shows_its_diagnosis_once(dashboard: Dashboard, pages: Any) -> None:
    page = dashboard.login(pages(), "ana")
    incident = _stalled_incident(dashboard, page, "crawl-d", "crawl diagnosed.example.org")
    page.goto(f"{dashboard.url}{incident}")
    page.get_by_role("button", name="Ask to diagnose").click()
    answer = page.locator("#answers p")
    expect(answer).to_have_count(1)
    expect(answer).not_to_be_empty()
    diagnosis = answer.inner_text()
    expect(page.get_by_text(diagnosis, exact=True)).to_have_count(1)

    page.reload()  # the history keeps it, once
    expect(page.locator("main").get_by_text(diagnosis)).to_have_count(1)


def _queue(dashboard: Dashboard) -> QueueService:
    runtime = dashboard.runtime
    return QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})


def _buttons(where: Any) -> Any:
    return where.get_by_role("button")


def test_job_buttons_follow_what_the_jobs_state_allows(dashboard: Dashboard, pages: Any) -> None:
    queue = _queue(dashboard)
    runner = queue.register(NewRunner("gpu", 1, "gpu-host-1", 4242, None, "gpu-1"))
    running = queue.submit(
        "train", org="acme", fleet="gpu", payload={"argv": ["true"]}, submitted_by="ci"
    ).id
    queue.lease(runner.id)
    waiting = queue.submit(
        "index", org="acme", fleet="gpu", payload={"argv": ["true"]}, submitted_by="ci"
    ).id
    finished = queue.submit(
        "report", org="acme", fleet="tpu", payload={"argv": ["true"]}, submitted_by="ci"
    ).id
    queue.cancel(finished)

    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/jobs")
    row = page.locator(f'tr[data-job-id="{running}"]')
    expect(_buttons(row)).to_have_text(["Cancel"])  # no delete while a task runs
    expect(_buttons(page.locator(f'tr[data-job-id="{waiting}"]'))).to_have_text(
        ["Cancel", "Delete"]
    )
    done = page.locator(f'tr[data-job-id="{finished}"]')
    expect(_buttons(done)).to_have_text(["Retry", "Delete"])

    # A press redraws its row's buttons for the job's new state.
    done.get_by_role("button", name="Retry").click()
    expect(page.locator("#answers")).to_contain_text("1 task queued again")
    expect(_buttons(done)).to_have_text(["Cancel", "Delete"])

    for job_id, shown in ((running, ["Cancel"]), (finished, ["Cancel", "Delete"])):
        page.goto(f"{dashboard.url}/web/jobs/{job_id}")
        expect(_buttons(page.locator("#job-actions"))).to_have_text(shown)
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#answers")).to_contain_text("1 task cancelled")
    expect(_buttons(page.locator("#job-actions"))).to_have_text(["Retry", "Delete"])


def test_a_decided_incident_offers_only_what_still_applies(
    dashboard: Dashboard, pages: Any
) -> None:
    page = dashboard.login(pages(), "ana")
    incident = _stalled_incident(dashboard, page, "crawl-x", "crawl decided.example.org")
    page.goto(f"{dashboard.url}{incident}")
    actions = page.locator("#incident-actions")
    expect(_buttons(actions)).to_have_text(["Retry", "Dismiss", "Ask to diagnose", "I am on it"])
    actions.get_by_role("button", name="Dismiss").click()
    expect(page.locator("#answers")).to_contain_text("dismissed")
    expect(_buttons(actions)).to_have_text(["Ask to diagnose"])
    page.reload()
    expect(page.locator(".decision")).to_contain_text("Dismiss by @ana")
    expect(_buttons(page.locator("#incident-actions"))).to_have_text(["Ask to diagnose"])
