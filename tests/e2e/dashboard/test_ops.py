"""Parts 6, 7 and 8: the topology with breakers and health, spend charts, process runs."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Dialog, expect

from tests.support import patient_http
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewRunner
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.supervise import (
    BreakerState,
    CheckResult,
    CircuitBreaker,
    CircuitState,
    HealthMonitor,
    HealthStatus,
    InMemoryStateStore,
)
from watchkeeper.timeline.service import TimelineService

from .conftest import LOOKS, Dashboard


def _breaker(name: str, state: CircuitState) -> CircuitBreaker:
    store = InMemoryStateStore()
    breaker = CircuitBreaker(name, store=store)
    if state is not CircuitState.CLOSED:
        store.compare_and_set(name, store.load(name), BreakerState(state, 5, 0.0))
    return breaker


class DiskSpace:
    """A health check that always finds the disk filling up."""

    name = "disk"

    async def run(self) -> CheckResult:
        return CheckResult(HealthStatus.DEGRADED, "82% used")


def test_topology_hangs_each_running_task_off_its_runner_with_breakers_and_health_dials(
    dashboard: Dashboard, pages: Any
) -> None:
    runtime = dashboard.runtime
    queue = QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})
    runner = queue.register(NewRunner("gpu", 2, "gpu-host-1", 4242, None, "gpu-1"))
    queue.register(NewRunner("cpu", 1, "cpu-host-1", 4343, None, "cpu-1"))
    job = queue.submit(
        "index the repo", org="acme", fleet="gpu", payload={"argv": ["true"]}, submitted_by="ci"
    )
    leased = queue.lease(runner.id)[0]
    dashboard.app.state.breakers = {
        name: _breaker(name, state)
        for name, state in (
            ("github", CircuitState.CLOSED),
            ("slack", CircuitState.OPEN),
            ("linear", CircuitState.HALF_OPEN),
        )
    }
    monitor = HealthMonitor(failure_threshold=1)
    monitor.register(DiskSpace(), critical=False)
    with ThreadPoolExecutor(1) as pool:  # Playwright holds this thread's event loop
        pool.submit(asyncio.run, monitor.run_once()).result()
    dashboard.app.state.health_monitor = monitor

    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/topology")
    picture = page.locator("svg.topology")
    expect(picture.locator(f'g.runner.alive[data-runner-id="{runner.id}"]')).to_have_count(1)
    expect(picture.locator("g.runner.alive")).to_have_count(2)
    task_node = picture.locator(f'g.task[data-task="{leased.task.id}"]')
    expect(task_node).to_contain_text(job.id)
    expect(task_node.locator(".ticon")).to_have_class(re.compile(r"ticon-running"))
    expect(picture.locator("line.topo-link")).to_have_count(1)
    expect(picture.locator("text.topo-beat").first).to_contain_text("s ago")

    for name, state in (("github", "closed"), ("slack", "open"), ("linear", "half-open")):
        expect(page.locator(f'li.breaker[data-breaker="{name}"]')).to_have_class(
            re.compile(f"breaker-{state}")
        )
    expect(page.locator('li.breaker[data-breaker="slack"] circle')).to_have_css(
        "fill", "rgb(198, 40, 40)"
    )
    expect(page.locator('figure.dial[data-check="supervision"]')).to_have_class(
        re.compile(r"dial-healthy")
    )
    expect(page.locator('figure.dial[data-check="disk"]')).to_have_class(re.compile("degraded"))

    # Live: the runner drops its task, and the picture follows.
    queue.complete(leased.task.id, leased.token)
    expect(picture.locator("g.task")).to_have_count(0)


def test_spend_is_drawn_by_day_model_provider_and_role(dashboard: Dashboard, pages: Any) -> None:
    runtime = dashboard.runtime
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000)
    timeline.ingest(
        [
            NewEvent(
                phase="implementer",
                role="implementer",
                model="coder-1",
                provider="acme-ai",
                usage=usage,
            ),
            NewEvent(
                phase="review",
                role="architect",
                model="coder-1",
                provider="acme-ai",
                usage=Usage(input_tokens=100_000),
            ),
            NewEvent(
                phase="review",
                role="architect",
                model="mystery",
                provider="elsewhere",
                usage=Usage(input_tokens=10),
            ),
        ],
        "runner",
    )
    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/spend")
    # $3 + $1.50 for the implementer, $0.30 for the review; the unknown model is not free.
    expect(page.locator("main")).to_contain_text("$4.80 over 3 calls, and 1 unpriced calls")
    for by in ("day", "model", "provider", "role"):
        expect(page.locator(f'svg.bars[data-by="{by}"] rect').first).to_be_visible()
    roles = page.locator('svg.bars[data-by="role"]')
    expect(roles.locator("text.bar-key")).to_contain_text(["implementer", "architect"])
    expect(roles.locator("rect").first).to_have_attribute("width", "350.0")


def test_topology_draws_live_runners_only_and_the_api_lists_the_rest(
    dashboard: Dashboard, pages: Any
) -> None:
    runtime = dashboard.runtime
    queue = QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})
    live = queue.register(NewRunner("gpu", 1, "gpu-host-1", 4242, None, "live-1"))
    stopped = queue.register(NewRunner("gpu", 1, "gpu-host-2", 4343, None, "stopped-1"))
    queue.stop_runner(stopped.id)
    an_hour_ago = QueueService(
        runtime.store,
        runtime.settings,
        clock=lambda: runtime.clock() - timedelta(hours=1),
        launchers={},
    )
    silent = an_hour_ago.register(NewRunner("gpu", 1, "gpu-host-3", 4444, None, "silent-1"))

    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/topology")
    picture = page.locator("svg.topology")
    expect(picture.locator(f'g.runner[data-runner-id="{live.id}"]')).to_have_count(1)
    expect(picture.locator("g.runner")).to_have_count(1)
    # The store forgets a runner that stopped cleanly; the silent one is counted, not drawn.
    expect(page.locator("#topology")).to_contain_text("1 runner stopped or silent")
    expect(page.locator("#topology")).to_contain_text("GET /api/v1/runners")

    token = {"Authorization": f"Bearer {dashboard.token('ci')}"}
    listed = patient_http.get(f"{dashboard.url}/api/v1/runners", headers=token).json()
    alive = {r["id"]: r["alive"] for r in listed["runners"]}
    assert alive == {live.id: True, silent.id: False}
    assert stopped.id not in alive


@pytest.mark.parametrize("look", LOOKS, indirect=True)
def test_ten_fleets_keep_readable_labels_and_the_drawing_scrolls_instead_of_shrinking(
    dashboard: Dashboard, pages: Any, look: tuple[dict[str, int], str]
) -> None:
    viewport = look[0]
    runtime = dashboard.runtime
    queue = QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})
    for n in range(10):
        queue.register(NewRunner(f"fleet-{n}", 1, f"host-{n}", 5000 + n, None, f"runner-{n}"))
    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/topology")
    picture = page.locator("svg.topology")
    expect(picture.locator("g.runner")).to_have_count(10)
    heights = picture.evaluate(
        "(svg) => [...svg.querySelectorAll('text')].map((t) => t.getBoundingClientRect().height)"
    )
    assert min(heights) >= 11, f"labels {min(heights):.1f} px tall at {viewport['width']} px"
    scroller = page.locator(".topology-scroll")
    assert scroller.evaluate("(e) => e.scrollWidth > e.clientWidth")
    expect(scroller).to_have_attribute("tabindex", "0")
    expect(scroller).to_have_accessible_name(re.compile(r"\S"))
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"the page is {width} px wide"


def _accept(dialog: Dialog) -> None:
    dialog.accept()


@pytest.mark.parametrize("look", LOOKS, indirect=True)
def test_a_process_run_log_follows_live_and_abort_says_how_it_went(
    dashboard: Dashboard, pages: Any, tmp_path: Path
) -> None:
    engine = dashboard.runtime.procs
    script = "echo first line; sleep 1; echo second line; exec sleep 120"
    launched = engine.start(
        LaunchRequest(("sh", "-c", script), cwd=str(tmp_path), name="slow echo", detach=True)
    )
    run_id = launched.run.run_id
    try:
        page = dashboard.login(pages(), "ana")
        page.goto(f"{dashboard.url}/web/procs")
        expect(page.locator(f'tr[data-proc="{run_id}"]')).to_contain_text("slow echo")
        page.locator(f'tr[data-proc="{run_id}"] a').click()
        expect(page.locator("#log")).to_contain_text("first line")
        expect(page.locator("#log")).to_contain_text("second line")  # followed, not reloaded
        page.once("dialog", _accept)
        page.get_by_role("button", name="Abort").click()
        expect(page.locator("#answers")).to_contain_text(re.compile(r"^signaled: "))
        expect(page.locator("#log-state")).to_contain_text("ended")
        # The run ended: the page settles without a reload, with nothing left to abort.
        expect(page.get_by_role("button", name="Abort")).to_have_count(0)
        expect(page.locator("#proc-status")).not_to_have_text(re.compile("running|starting"))
    finally:
        engine.abort(run_id, grace_s=0)


@pytest.mark.parametrize("look", LOOKS, indirect=True)
def test_a_process_page_settles_when_the_run_ends_on_its_own(
    dashboard: Dashboard, pages: Any, tmp_path: Path
) -> None:
    engine = dashboard.runtime.procs
    gate = tmp_path / "gate"
    script = f"echo waiting; while [ ! -e {gate} ]; do sleep 0.1; done; echo done"
    launched = engine.start(
        LaunchRequest(("sh", "-c", script), cwd=str(tmp_path), name="gated", detach=True)
    )
    run_id = launched.run.run_id
    try:
        page = dashboard.login(pages(), "ana")
        page.goto(f"{dashboard.url}/web/procs/{run_id}")
        expect(page.locator("#log")).to_contain_text("waiting")
        expect(page.get_by_role("button", name="Abort")).to_be_visible()
        page.evaluate("() => { window.notReloaded = true; }")
        gate.touch()
        expect(page.locator("#log")).to_contain_text("done")
        expect(page.locator("#log-state")).to_contain_text("ended")
        expect(page.get_by_role("button", name="Abort")).to_have_count(0)
        expect(page.locator("#proc-status")).to_have_text("succeeded")
        assert page.evaluate("() => window.notReloaded") is True
    finally:
        engine.abort(run_id, grace_s=0)
