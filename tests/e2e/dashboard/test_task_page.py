"""A task's page: its facts, its timeline, and its output following live while a real
runner runs it, redacted, until the page says the task ended."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from watchkeeper.client import Client
from watchkeeper.records.timeline import NewEvent
from watchkeeper.store.tokens import Role
from watchkeeper.timeline.service import TimelineService

from ...integration.queue_daemons import QUICK, start_runner
from ...support.waiting import wait_for
from .conftest import WAIT_MS, Dashboard
from .world import DESKTOP, PHONE

SECRET = "s3cr3t-task-value-789"
# Early lines and a secret, then it waits for the first gate, prints late lines, waits for
# the second gate, and ends.
GATED = (
    "import os, sys, time\n"
    "def wait(path):\n"
    "    while not os.path.exists(path):\n"
    "        time.sleep(0.02)\n"
    "for i in range(20):\n"
    "    print(f'early line {i:02d}', flush=True)\n"
    f"print('API_TOKEN={SECRET}', flush=True)\n"
    "print('<b>not bold</b>', flush=True)\n"
    "wait(sys.argv[1])\n"
    "for i in range(5):\n"
    "    print(f'late line {i:02d}', flush=True)\n"
    "wait(sys.argv[2])\n"
    "print('last words', flush=True)\n"
)


@pytest.fixture
def runner(dashboard: Dashboard, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        "WATCHKEEPER_URL": dashboard.url,
        "WATCHKEEPER_TOKEN": dashboard.token("runner", Role.REPORTER),
    }
    daemon = start_runner(
        "ship", tmp_path / "runner", tmp_path / "runner.log", *QUICK, "--grace", "2", env=env
    )
    try:
        yield daemon
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)


def _page(browser: Any, dashboard: Dashboard, viewport: dict[str, int]) -> Any:
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(WAIT_MS)
    return dashboard.login(context.new_page(), "ana")


def _fits(page: Any, width: int) -> None:
    scroll = page.evaluate("() => document.documentElement.scrollWidth")
    assert scroll <= width, f"{page.url} is {scroll} px wide in a {width} px viewport"


@pytest.mark.usefixtures("runner")
def test_a_running_tasks_output_follows_live_redacted_until_the_page_says_it_ended(
    browser: Any, dashboard: Dashboard, tmp_path: Path
) -> None:
    first, second = tmp_path / "gate-1", tmp_path / "gate-2"
    with Client(dashboard.url, dashboard.token("ana")) as client:
        job = client.jobs.submit(
            "gated",
            org="o",
            fleet="ship",
            argv=[sys.executable, "-c", GATED, str(first), str(second)],
        )
        job_id, task_id = str(job["id"]), str(job["tasks"][0]["id"])

        def shipped() -> bool:
            with _viewer(dashboard) as http:
                body = http.get(f"/api/v1/tasks/{task_id}/output", params={"all": "true"}).json()
            return bool(body.get("output")) and "not bold" in body["output"]

        wait_for(shipped, what="the early lines, shipped", timeout=60)
        TimelineService(
            dashboard.runtime.store, dashboard.runtime.settings, clock=dashboard.runtime.clock
        ).ingest(
            [
                NewEvent(
                    "implementer",
                    job_id=job_id,
                    task_id=task_id,
                    round=1,
                    role="implementer",
                    rationale="reads the gate",
                )
            ],
            "runner",
        )

        # The job page leads to the task's page.
        desktop = _page(browser, dashboard, DESKTOP)
        desktop.goto(f"{dashboard.url}/web/jobs/{job_id}")
        desktop.get_by_role("link", name=f"task 0 {task_id}").click()
        expect(desktop).to_have_url(f"{dashboard.url}/web/tasks/{task_id}")
        phone = _page(browser, dashboard, PHONE)
        phone.goto(f"{dashboard.url}/web/tasks/{task_id}")

        for page in (desktop, phone):
            output = page.locator("#task-output")
            expect(output).to_contain_text("early line 19")
            expect(output).to_contain_text("API_TOKEN=[redacted]")
            expect(output).to_contain_text("<b>not bold</b>")  # text, not markup
            expect(page.locator("#task-output b")).to_have_count(0)
            expect(page.locator("#task-state")).to_contain_text("following")
            expect(page.locator("#task-timeline")).to_contain_text("reads the gate")
            expect(page.locator("#task-facts")).to_contain_text("running")
            # A mark the page keeps only as long as it is not reloaded.
            page.evaluate("() => { window.notReloaded = true; }")

        first.touch()
        for page in (desktop, phone):
            expect(page.locator("#task-output")).to_contain_text("late line 04")
        second.touch()
        wait_for(
            lambda: client.jobs.get(job_id)["status"] == "succeeded",
            what="the task's end",
            timeout=60,
        )
        for page in (desktop, phone):
            expect(page.locator("#task-output")).to_contain_text("last words")
            expect(page.locator("#task-state")).to_contain_text("the task ended: succeeded")
            # The facts settle too: the status no longer says running.
            status = page.locator("#task-facts dt:text-is('Status') + dd")
            expect(status).to_have_text(re.compile(r"^succeeded"))
            assert page.evaluate("() => window.notReloaded") is True
            text = page.locator("#task-output").inner_text()
            assert SECRET not in text
            assert text.count("early line 00") == 1  # nothing shown twice
            _fits(page, PHONE["width"] if page is phone else DESKTOP["width"])

        # Opened after the end, the page says so at once and shows all of it.
        desktop.reload()
        expect(desktop.locator("#task-state")).to_contain_text("the task ended: succeeded")
        expect(desktop.locator("#task-output")).to_contain_text("last words")
        assert SECRET not in desktop.content()
        desktop.context.close()
        phone.context.close()


def _viewer(dashboard: Dashboard) -> Any:
    import httpx

    token = dashboard.token("vera", Role.VIEWER)
    return httpx.Client(
        base_url=dashboard.url, headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


@pytest.mark.parametrize("task_id", ["t-0123456789abcdef", "not-a-task", "t-xyz", "T-FF"])
def test_an_unknown_or_malformed_task_id_answers_the_not_found_page(
    dashboard: Dashboard, pages: Any, task_id: str
) -> None:
    page = dashboard.login(pages())
    answer = page.goto(f"{dashboard.url}/web/tasks/{task_id}")
    assert answer is not None and answer.status == 404
    expect(page.locator("main h1")).to_have_text("Not found")
    expect(page.locator("main")).to_contain_text("no task")


SILENT = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.02)\n"


@pytest.mark.usefixtures("runner")
def test_a_task_that_printed_nothing_says_so_once_it_ended(
    browser: Any, dashboard: Dashboard, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with Client(dashboard.url, dashboard.token("ana")) as client:
        job = client.jobs.submit(
            "silent", org="o", fleet="ship", argv=[sys.executable, "-c", SILENT, str(gate)]
        )
        job_id, task_id = str(job["id"]), str(job["tasks"][0]["id"])
        wait_for(
            lambda: client.jobs.get(job_id)["status"] == "running",
            what="the task's start",
            timeout=60,
        )
        page = _page(browser, dashboard, PHONE)
        page.goto(f"{dashboard.url}/web/tasks/{task_id}")
        expect(page.locator("#task-no-output")).to_have_text(
            "No output yet: its runner ships it while the task runs."
        )
        gate.touch()
        expect(page.locator("#task-state")).to_contain_text("the task ended: succeeded")
        expect(page.locator("#task-no-output")).to_have_text("The task printed nothing.")
        expect(page.locator("#task-output")).to_be_hidden()  # no empty box
        page.reload()
        expect(page.locator("#task-no-output")).to_have_text("The task printed nothing.")
        expect(page.locator("#task-output")).to_be_hidden()
        page.context.close()
