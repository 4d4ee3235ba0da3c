"""Parts 3, 4 and 5: the jobs list in the URL, blocked reasons, control, job pages, task icons."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Dialog, expect

from tests.support import patient_http
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewRunner
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.server.app import create_app
from watchkeeper.server.web import tasks
from watchkeeper.store.queue import QueueStore
from watchkeeper.store.tokens import Role
from watchkeeper.timeline.service import TimelineService

from ...support.live_server import free_port
from .conftest import Dashboard, open_runtime, serve


def _queue(dashboard: Dashboard) -> QueueService:
    runtime = dashboard.runtime
    return QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})


def _submit(queue: QueueService, title: str, org: str, fleet: str) -> str:
    job = queue.submit(title, org=org, fleet=fleet, payload={"argv": ["true"]}, submitted_by="ci")
    return job.id


def _accept(dialog: Dialog) -> None:
    dialog.accept()


def test_jobs_filter_into_a_shareable_url_show_why_tasks_wait_and_answer_control_with_counts(
    dashboard: Dashboard, pages: Any
) -> None:
    queue = _queue(dashboard)
    queue.register(NewRunner("gpu", 1, "gpu-host-1", 4242, None, "gpu-1"))
    docs = _submit(queue, "build the docs", "acme", "gpu")
    train = _submit(queue, "train the model", "acme", "tpu")
    _submit(queue, "nightly report", "beta", "gpu")

    ana = dashboard.login(pages(), "ana")
    ana.goto(f"{dashboard.url}/web/jobs")
    rows = ana.locator("tr.job")
    expect(rows).to_have_count(3)
    # A waiting reason keeps a spinner; a problem shows a static warning.
    waiting = ana.locator(f'tr[data-job-id="{docs}"] .ticon')
    expect(waiting).to_have_class(re.compile(r"ticon-waiting"))
    expect(waiting.locator("svg.spin")).to_have_count(1)
    problem = ana.locator(f'tr[data-job-id="{train}"] .ticon')
    expect(problem).to_have_class(re.compile(r"ticon-warning"))
    expect(problem.locator("svg.spin")).to_have_count(0)
    expect(ana.locator(f'tr[data-job-id="{train}"] .blocked')).to_contain_text("tpu")

    ana.fill("input[name=fleet]", "gpu")
    ana.fill("input[name=q]", "docs")
    ana.select_option("select[name=status]", "queued")
    ana.get_by_role("button", name="Filter").click()
    expect(ana).to_have_url(re.compile(r"/web/jobs\?status=queued&fleet=gpu&q=docs$"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("build the docs")
    shared = ana.url

    # The shared link shows the same list to someone else.
    ben = dashboard.login(pages(), "ben")
    ben.goto(shared)
    expect(ben.locator("tr.job")).to_have_count(1)
    expect(ben.locator("tr.job").first).to_contain_text("build the docs")
    expect(ben.locator("input[name=q]")).to_have_value("docs")
    expect(ben.locator("select[name=status]")).to_have_value("queued")

    row = rows.first
    row.get_by_role("button", name="Cancel").click()
    expect(ana.locator("#answers")).to_contain_text("1 task cancelled")
    # The icon follows task.updated without a reload.
    expect(row.locator(".ticon")).to_have_class(re.compile(r"ticon-cancelled"))
    row.get_by_role("button", name="Retry").click()
    expect(ana.locator("#answers")).to_contain_text("1 task queued again")

    ana.goto(f"{dashboard.url}/web/jobs?fleet=tpu")
    ana.once("dialog", _accept)
    ana.locator("tr.job").first.get_by_role("button", name="Delete").click()
    expect(ana.locator("#answers")).to_contain_text(f"job {train} deleted with its 1 task")


def _phases(job_id: str, task_id: str, ended: Any) -> list[NewEvent]:
    def event(phase: str, rnd: int, seconds: float, **more: Any) -> NewEvent:
        return NewEvent(
            phase=phase,
            at=ended - timedelta(seconds=100 - seconds),
            job_id=job_id,
            task_id=task_id,
            round=rnd,
            duration_s=10.0,
            **more,
        )

    usage = Usage(input_tokens=12_000, output_tokens=3_000)
    coder = {"role": "implementer", "model": "coder-1", "provider": "acme-ai", "usage": usage}
    return [
        event("implementer", 1, 10, rationale="wrote the parser", **coder),
        event(
            "review", 1, 25, outcome="revision", role="architect", rationale="handle empty input"
        ),
        event("implementer", 2, 40, rationale="handled empty input", **coder),
        event("review", 2, 55, outcome="approved", role="architect"),
        event("verify", 2, 70, outcome="ok", name="pytest"),
    ]


def test_a_job_page_draws_rounds_phase_by_phase_with_spend_and_its_merge_link(
    dashboard: Dashboard, pages: Any
) -> None:
    runtime = dashboard.runtime
    queue = _queue(dashboard)
    runner = queue.register(NewRunner("gpu", 1, "gpu-host-1", 4242))
    job_id = _submit(queue, "parse the config", "acme", "gpu")
    lease = queue.lease(runner.id)[0]
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    timeline.ingest(_phases(job_id, lease.task.id, runtime.clock()), "runner")
    queue.complete(lease.task.id, lease.token)
    merged = {
        "job_id": job_id,
        "kind": "merge",
        "url": "https://example.org/acme/pull/7",
        "title": "acme/app#7",
        "actor": "ana",
        "detail": {},
        "signature": "0" * 64,
    }
    timeline.store.record_links("github", "delivery-1", [merged], runtime.clock())

    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/jobs/{job_id}")
    picture = page.locator("svg.timeline")
    expect(picture.locator("g.phase")).to_have_count(5)
    expect(picture.locator("g.ph-revision")).to_have_count(1)
    expect(picture.locator("g.ph-approved")).to_have_count(1)
    expect(picture.locator("g.ph-passed")).to_have_count(1)
    expect(picture.locator("g.ph-implementer title").first).to_contain_text("15000 tokens")
    expect(page.get_by_role("heading", name=re.compile(r"^Round 2"))).to_be_visible()
    by_role = page.locator("table.spend", has=page.locator("caption", has_text="Per role"))
    # 2 calls of 12k in and 3k out at $3 and $15 per million: 2 * (0.036 + 0.045) = $0.162.
    expect(by_role.locator("tr", has_text="implementer")).to_contain_text("$0.1620")
    expect(page.locator("a.merge-link")).to_have_attribute(
        "href", "https://example.org/acme/pull/7"
    )
    expect(page.locator("section", has_text="Execution record")).to_contain_text(
        "Signed record (Ed25519"
    )
    expect(page.locator(".task-card .ticon")).to_have_class(re.compile(r"ticon-completed"))


ICON_CASES: list[dict[str, Any]] = [
    {"status": "queued", "interrupted": True},
    {"status": "queued", "interrupted": True, "blocked": {"code": "no_runner"}},
    {"status": "running", "interrupted": True},
    {"status": "waiting", "interrupted": True},
    {"status": "queued", "pending_approval": True, "interrupted": True},
    {"status": "succeeded", "interrupted": True},
    {"status": "failed", "interrupted": True},
    {"status": "cancelled", "interrupted": True},
    {"status": "stuck", "interrupted": True},
    {"status": "stuck"},
    {"status": "queued", "blocked": {"code": "awaiting_runner", "message": "m"}},
    {"status": "queued", "blocked": {"code": "provisioning", "message": "m"}},
    {"status": "queued", "blocked": {"code": "compute_cap", "message": "m"}},
    {"status": "queued", "interrupted_at": "2026-01-05T12:00:00Z"},
    {"status": "queued"},
]


def test_the_interrupted_icon_follows_its_precedence_on_every_surface_and_live_updates(
    dashboard: Dashboard, pages: Any
) -> None:
    queue = _queue(dashboard)
    job_id = _submit(queue, "resume after restart", "acme", "tpu")
    task_id = queue.job(job_id).tasks[0].id
    page = dashboard.login(pages(), "ana")

    page.goto(f"{dashboard.url}/web/jobs")
    in_browser = page.evaluate("cases => cases.map(c => wk.taskIcon(c))", ICON_CASES)
    assert in_browser == [tasks.icon(case) for case in ICON_CASES]
    assert in_browser[:9] == [
        "interrupted",
        "interrupted",
        "running",
        "approval",
        "approval",
        "completed",
        "failed",
        "cancelled",
        "interrupted",
    ]

    for path in ("/web/jobs", f"/web/jobs/{job_id}"):  # a list row, then a task card
        page.goto(f"{dashboard.url}{path}")
        icon = page.locator(f'.ticon[data-task-id="{task_id}"]')
        expect(icon).to_have_class(re.compile(r"ticon-warning"))
        page.evaluate(
            "id => wk.applyTaskUpdate({id, status: 'queued', interrupted: true})", task_id
        )
        expect(icon).to_have_class(re.compile(r"ticon-interrupted"))
        expect(icon).to_have_attribute("aria-label", "Interrupted by restart")
        expect(icon).to_have_attribute("title", "Interrupted by restart")
        expect(icon.locator("circle")).to_have_attribute("fill", "#d32f2f")
        # An event that leaves out `interrupted` keeps the marker.
        page.evaluate("id => wk.applyTaskUpdate({id, status: 'queued', step: 'x'})", task_id)
        expect(icon).to_have_class(re.compile(r"ticon-interrupted"))
        page.evaluate("id => wk.applyTaskUpdate({id, status: 'running'})", task_id)
        expect(icon).to_have_class(re.compile(r"ticon-running"))
        page.evaluate("id => wk.applyTaskUpdate({id, status: 'queued'})", task_id)
        expect(icon).to_have_class(re.compile(r"ticon-interrupted"))
        page.evaluate(
            "id => wk.applyTaskUpdate({id, status: 'queued', interrupted: false})", task_id
        )
        expect(icon).not_to_have_class(re.compile(r"ticon-interrupted"))


@pytest.mark.skipif(
    not hasattr(QueueStore, "mark_interrupted"),
    reason="the task's interrupted marker is not in this tree yet",
)
def test_the_red_icon_appears_after_a_restart_and_clears_on_resume(
    tmp_path: Path, sqlite_template: Path, pages: Any
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(sqlite_template, data / "watchkeeper.db")
    clock = ManualClock(datetime.now(UTC))
    runtime = open_runtime(data, clock)
    port = free_port()
    admin = {"Authorization": f"Bearer {runtime.store.tokens.create(Role.ADMIN, 'ci', clock())[1]}"}
    runner_token = runtime.store.tokens.create(Role.REPORTER, "runner", clock())[1]
    runner = {"Authorization": f"Bearer {runner_token}"}
    try:
        app = create_app(runtime, run_sweeper=False)
        with serve(app, port) as url:
            submitted = patient_http.post(
                f"{url}/api/v1/jobs",
                headers=admin,
                timeout=10,
                json={
                    "title": "summarise the logs",
                    "org": "acme",
                    "fleet": "gpu",
                    "payload": {"argv": ["true"]},
                    "lease_s": 30,
                },
            )
            job_id = submitted.json()["id"]
            registered = patient_http.post(
                f"{url}/api/v1/runners",
                headers=runner,
                timeout=10,
                json={"fleet": "gpu", "host": "gpu-host-1", "pid": 4242},
            )
            runner_id = registered.json()["id"]
            leased = patient_http.post(
                f"{url}/api/v1/runners/{runner_id}/lease", headers=runner, timeout=10
            ).json()["tasks"]
            task_id = leased[0]["id"]
            page = Dashboard(url, runtime, app).login(pages(), "ana")
            page.goto(f"{url}/web/jobs/{job_id}")
            icon = page.locator(f'.ticon[data-task-id="{task_id}"]')
            expect(icon).to_have_class(re.compile(r"ticon-running"))
            expect(page.locator("body")).to_have_attribute("data-stream", "open")

        # The server restarts; its runner went away with it and the lease lapses meanwhile.
        clock.advance(120)
        restarted = create_app(runtime, run_sweeper=False)
        with serve(restarted, port) as url:
            # The page reconnects by itself, is told to resync, and shows the marker.
            expect(icon).to_have_attribute("data-interrupted", "1")
            expect(icon).to_have_class(re.compile(r"ticon-running"))  # running still wins
            _queue(Dashboard(url, runtime, restarted)).recover()
            expect(icon).to_have_class(re.compile(r"ticon-interrupted"))
            expect(icon).to_have_attribute("aria-label", "Interrupted by restart")
            expect(icon).to_have_attribute("title", "Interrupted by restart")

            # A runner takes the task up again: the marker clears, live.
            patient_http.post(
                f"{url}/api/v1/runners/{runner_id}/heartbeat", headers=runner, timeout=10
            )
            again = patient_http.post(
                f"{url}/api/v1/runners/{runner_id}/lease", headers=runner, timeout=10
            ).json()["tasks"]
            assert [t["id"] for t in again] == [task_id]
            expect(icon).to_have_class(re.compile(r"ticon-running"))
            expect(icon).to_have_attribute("data-interrupted", "")
    finally:
        runtime.close()
