"""Screenshots of the dashboard's main pages, for the README: ``docs/screenshots/*.png``.

Seeds a small, varied world (runs that stalled and failed, queued jobs with
their blocked reasons, runners alive and offline, a job with two rounds and a
merged pull request, spend over a week, circuit breakers, a process run),
serves it, and photographs each page in headless Chromium (Debian's
``/usr/bin/chromium``, driven by Playwright).

Run::

    .venv/bin/python bench/screenshots.py            # writes docs/screenshots/*.png
"""

from __future__ import annotations

import sys

# This folder's queue.py (the queue benchmark) would shadow the standard library's queue
# module, which psycopg and concurrent.futures import: search this folder last.
sys.path.append(sys.path.pop(0))

import argparse
import asyncio
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import uvicorn

from _common import free_port, settings_for
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewRunner
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import create_app, reports_for
from watchkeeper.store.runs import NewRun
from watchkeeper.store.tokens import Role
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

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ACTION = {"url": "http://127.0.0.1:9/{kind}/{run_id}/{action}"}
KINDS = {
    "crawl": {"actions": {"retry": ACTION, "cancel": ACTION}},
    "document_job": {"actions": {"retry": ACTION}},
}
PRICES = {
    "acme-ai/coder-1": {"input_per_mtok": 3.0, "output_per_mtok": 15.0},
    "acme-ai/reviewer-1": {"input_per_mtok": 1.0, "output_per_mtok": 5.0},
    "cloud-b/coder-1": {"input_per_mtok": 3.5, "output_per_mtok": 16.0},
}


@contextmanager
def serve(runtime: Runtime) -> Iterator[tuple[str, Any]]:
    """The whole server on a free loopback port, in a thread."""
    app = create_app(runtime, run_sweeper=True)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def seed_runs(runtime: Runtime) -> None:
    """Work that stalls, fails, runs and waits."""
    reports = reports_for(runtime)
    runs = [
        ("crawl", "crawl-docs", "crawl docs.example.org", 1.0),
        ("crawl", "crawl-shop", "crawl shop.example.org", 3600.0),
        ("document_job", "q3-summary", "summarise the Q3 report", 3600.0),
        ("chat_turn", "turn-42", "answer #support: refund policy", 3600.0),
        ("research_session", "rs-7", "compare vector databases", 3600.0),
    ]
    for kind, run_id, title, budget in runs:
        reports.start(NewRun(kind, run_id, title, None, "none", budget, None, 3600.0))
    reports.progress("crawl", "crawl-shop", "page 412 of 900", None)
    reports.progress("research_session", "rs-7", "reading benchmark 3", None)
    reports.fail("document_job", "q3-summary", "the PDF parser timed out after 120 s", None, None)


def seed_queue(runtime: Runtime, folder: Path) -> tuple[QueueService, str]:
    """Runners alive and offline, jobs in every state, one job with two rounds and a merge."""
    now = runtime.clock()
    queue = QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})
    past = QueueService(
        runtime.store, runtime.settings, clock=lambda: now - timedelta(minutes=20), launchers={}
    )
    past.register(NewRunner("cpu", 2, "cpu-host-1", 3101, None, "cpu-1"))
    gpu1 = queue.register(NewRunner("gpu", 2, "gpu-host-1", 4242, None, "gpu-1"))
    gpu2 = queue.register(NewRunner("gpu", 1, "gpu-host-2", 4243, None, "gpu-2"))

    def submit(title: str, org: str, fleet: str) -> str:
        return queue.submit(
            title, org=org, fleet=fleet, payload={"argv": ["agent", "run"]}, submitted_by="ana"
        ).id

    done = submit("parse the config file", "acme", "gpu")
    lease = queue.lease(gpu1.id)[0]
    record_rounds(runtime, done, lease.task.id)
    queue.complete(lease.task.id, lease.token)
    failed = submit("migrate the billing tables", "acme", "gpu")
    lease = queue.lease(gpu2.id)[0]
    queue.fail(lease.task.id, lease.token, "tests failed: 3 of 120")
    for title, org in (("index the monorepo", "acme"), ("write release notes", "beta")):
        submit(title, org, "gpu")
    queue.lease(gpu1.id, 2)
    queue.lease(gpu2.id)
    submit("translate the handbook", "beta", "gpu")
    submit("fine-tune the ranker", "acme", "tpu")
    submit("nightly dependency audit", "acme", "cpu")
    del failed, folder
    return queue, done


def record_rounds(runtime: Runtime, job_id: str, task_id: str) -> None:
    """Two rounds: a revision asked, then approved and verified; a merged pull request."""
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    end = runtime.clock()
    coder = {"role": "implementer", "model": "coder-1", "provider": "acme-ai"}
    reviewer = {"role": "reviewer", "model": "reviewer-1", "provider": "acme-ai"}

    def event(phase: str, rnd: int, at_s: float, length: float, **more: Any) -> NewEvent:
        return NewEvent(
            phase=phase,
            at=end - timedelta(seconds=600 - at_s),
            job_id=job_id,
            task_id=task_id,
            round=rnd,
            duration_s=length,
            **more,
        )

    timeline.ingest(
        [
            event(
                "implementer",
                1,
                140,
                140,
                usage=Usage(48_000, 9_000),
                rationale="parses TOML and YAML; adds schema checks",
                **coder,
            ),
            event(
                "review",
                1,
                200,
                50,
                outcome="revision",
                usage=Usage(30_000, 1_500),
                rationale="empty files crash the loader",
                **reviewer,
            ),
            event(
                "implementer",
                2,
                330,
                120,
                usage=Usage(52_000, 6_000),
                rationale="handles empty files; adds a test",
                **coder,
            ),
            event("review", 2, 380, 40, outcome="approved", usage=Usage(31_000, 900), **reviewer),
            event("verify", 2, 470, 80, outcome="ok", name="pytest", detail="120 passed"),
        ],
        "runner-gpu-1",
    )
    merged = {
        "job_id": job_id,
        "kind": "merge",
        "url": "https://github.com/acme/app/pull/128",
        "title": "acme/app#128: config loader",
        "actor": "ana",
        "detail": {},
        "signature": "0" * 64,
    }
    timeline.store.record_links("github", "screenshot-1", [merged], runtime.clock())


def seed_spend(runtime: Runtime) -> None:
    """A week of model calls across providers and roles."""
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    now = runtime.clock()
    events = []
    for day in range(7):
        for n in range(3 + day % 3):
            provider = "cloud-b" if n % 3 == 2 else "acme-ai"
            role, model = ("reviewer", "reviewer-1") if n % 2 else ("implementer", "coder-1")
            if provider == "cloud-b":
                model = "coder-1"
            events.append(
                NewEvent(
                    phase="implementer" if role == "implementer" else "review",
                    at=now - timedelta(days=day, hours=n),
                    role=role,
                    model=model,
                    provider=provider,
                    usage=Usage(40_000 + 9_000 * n, 4_000 + 800 * day),
                )
            )
    events.append(
        NewEvent(
            phase="tool",
            role="implementer",
            model="mystery-9",
            provider="elsewhere",
            usage=Usage(1_000, 100),
        )
    )
    timeline.ingest(events, "runner-gpu-1")


def decorate(app: Any) -> None:
    """Breakers in each state and a health monitor with a disk check."""
    breakers = {}
    for name, state in (
        ("github-webhooks", CircuitState.CLOSED),
        ("slack-api", CircuitState.OPEN),
        ("model-gateway", CircuitState.HALF_OPEN),
    ):
        store = InMemoryStateStore()
        breakers[name] = CircuitBreaker(name, store=store)
        if state is not CircuitState.CLOSED:
            store.compare_and_set(name, store.load(name), BreakerState(state, 5, 0.0))
    app.state.breakers = breakers

    class Disk:
        name = "disk /var/lib/watchkeeper"

        async def run(self) -> CheckResult:
            return CheckResult(HealthStatus.DEGRADED, "82% used")

    class Memory:
        name = "memory"

        async def run(self) -> CheckResult:
            return CheckResult(HealthStatus.HEALTHY, "41% used")

    monitor = HealthMonitor(failure_threshold=1)
    monitor.register(Disk(), critical=False)
    monitor.register(Memory())
    asyncio.run(monitor.run_once())
    app.state.health_monitor = monitor


#: The pages added with the single pane and the supervision canvas, shot at both sizes.
PANE_PAGES = {
    "incidents": "/web/incidents",
    "models": "/web/models",
    "integrations": "/web/integrations",
    "settings": "/web/settings",
    "onboarding": "/web/onboarding",
}


def photograph(base: str, token: str, shots: dict[str, str], out: Path) -> list[Path]:
    """Log in, then one full-page screenshot per page."""
    from playwright.sync_api import sync_playwright

    taken = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
            page.goto(f"{base}/web/login")
            taken.append(out / "login.png")
            page.screenshot(path=taken[-1])
            page.fill("#token", token)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"/web/$"))
            for name, path in shots.items():
                page.goto(f"{base}{path}", wait_until="load")
                page.wait_for_selector("body[data-stream=open]")
                if name == "bell":
                    page.click(".bell summary")
                taken.append(out / f"{name}.png")
                page.screenshot(path=taken[-1], full_page=name != "bell")
        finally:
            browser.close()
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description="Screenshots of the dashboard's main pages.")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wk-shots-") as name:
        folder = Path(name)
        (folder / "data").mkdir()
        url = f"sqlite:///{folder / 'data' / 'watchkeeper.db'}"
        settings = settings_for(folder, url, kinds=KINDS, prices=PRICES)
        runtime = Runtime.open(settings, notifier=OpsNotifier(settings.ops))
        seed_runs(runtime)
        queue, job_id = seed_queue(runtime, folder)
        seed_spend(runtime)
        token = runtime.store.tokens.create(Role.ADMIN, "ana", datetime.now(UTC))[1]
        engine = ProcEngine.from_settings(settings, runtime.store, runtime.clock)
        script = 'for i in 1 2 3 4 5; do echo "step $i: fetched page $i"; done; exec sleep 120'
        run = engine.start(
            LaunchRequest(("sh", "-c", script), cwd=name, name="fetch pages", detach=True)
        ).run
        try:
            with serve(runtime) as (base, app):
                app.state.procs_engine = engine
                decorate(app)
                time.sleep(4)  # the crawl with a one-second budget stalls; its incident opens
                shots = {
                    "home": "/web/?all=1",
                    "bell": "/web/",
                    "incident": "/web/incidents/1",
                    "jobs": "/web/jobs",
                    "job": f"/web/jobs/{job_id}",
                    "topology": "/web/topology",
                    "spend": "/web/spend",
                    "procs": "/web/procs",
                    "proc": f"/web/procs/{run.run_id}",
                    **PANE_PAGES,
                    "task": f"/web/tasks/{queue.job(job_id).tasks[0].id}",
                }
                taken = photograph(base, token, shots, args.out)
        finally:
            engine.abort(run.run_id, grace_s=0)
            runtime.close()
    for path in taken:
        print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)


if __name__ == "__main__":
    main()
