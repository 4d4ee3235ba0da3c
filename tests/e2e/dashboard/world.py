"""One served dashboard with something on every page, shared by a test module.

The phone and accessibility tests visit every page at several sizes and themes; they
look and never act, so one world per module serves them all.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewRunner
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.server.app import create_app, reports_for
from watchkeeper.store.runs import NewRun
from watchkeeper.timeline.service import TimelineService
from watchkeeper.watch.silences import Matchers

from ...support.waiting import wait_for
from .conftest import WAIT_MS, Dashboard, open_runtime, serve

PHONE = {"width": 390, "height": 844}
#: A program the server keeps running, so its pages have one to show.
PROGRAMS = {"crawler": {"command": ["sleep", "300"], "start_s": 0}}
DESKTOP = {"width": 1280, "height": 800}


@dataclass
class World:
    """The served dashboard and the path of each of its pages."""

    dashboard: Dashboard
    paths: dict[str, str]


def _seed(dashboard: Dashboard, folder: Path) -> tuple[dict[str, str], list[str]]:
    runtime = dashboard.runtime
    reports = reports_for(runtime)
    # A one-second budget: the sweep finds it stalled and opens an incident.
    reports.start(NewRun("crawl", "crawl-1", "crawl docs.example.org", None, "none", 1.0, None, 60))
    reports.start(
        NewRun("crawl", "crawl-2", "crawl shop.example.org", None, "none", 3600.0, None, 3600)
    )
    queue = QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})
    runner = queue.register(NewRunner("gpu", 2, "gpu-host-1", 4242, None, "gpu-1"))

    def submit(title: str, fleet: str) -> str:
        payload = {"argv": ["agent", "run", "--repository", "acme/a-rather-long-name"]}
        return queue.submit(title, org="acme", fleet=fleet, payload=payload, submitted_by="ci").id

    job_id = submit("parse the configuration file and report what it finds", "gpu")
    lease = queue.lease(runner.id)[0]
    # More output than its box holds: the box scrolls, as a real task's does.
    lines = "\n".join(f"step {i:03d}: checked the loader" for i in range(120))
    queue.store.record_output(lease.task.id, lease.token, lines, runtime.clock())
    submit("fine-tune the ranker on last week's clicks", "tpu")
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    usage = Usage(48_000, 9_000)
    timeline.ingest(
        [
            NewEvent(
                phase="implementer",
                job_id=job_id,
                task_id=lease.task.id,
                round=1,
                duration_s=140,
                role="implementer",
                model="coder-1",
                provider="acme-ai",
                usage=usage,
                rationale="parses TOML and YAML; adds schema checks to every loader",
            ),
        ],
        "runner-gpu-1",
    )
    runtime.silences.add(
        Matchers("crawl", None, "nightly *", "glob", None), "1h", "maintenance", "@ben", "api"
    )
    request = LaunchRequest(("sleep", "120"), cwd=str(folder), name="long sleep", detach=True)
    run_id = runtime.procs.start(request).run.run_id
    # A run whose log is longer than its box.
    script = "for i in $(seq 1 300); do echo line $i of the count; done; exec sleep 120"
    counting = LaunchRequest(("sh", "-c", script), cwd=str(folder), name="count", detach=True)
    log_id = runtime.procs.start(counting).run.run_id
    incidents = wait_for(
        lambda: runtime.incidents.list("open"), what="the stalled run's incident", timeout=60
    )
    paths = {
        "home": "/web/",
        "jobs": "/web/jobs",
        "job": f"/web/jobs/{job_id}",
        "incident": f"/web/incidents/{incidents[0].id}",
        "incidents": "/web/incidents",
        "processes": "/web/procs",
        "process": f"/web/procs/{run_id}",
        "process log": f"/web/procs/{log_id}",
        "silences": "/web/silences",
        "spend": "/web/spend",
        "spend range": "/web/spend?since=2020-01-01&until=2099-12-31",
        "task": f"/web/tasks/{lease.task.id}",
        "topology": "/web/topology",
        "models": "/web/models",
        "integrations": "/web/integrations",
        "settings": "/web/settings",
        "onboarding": "/web/onboarding",
        "supervision": "/web/supervision",
        "programs": "/web/programs",
        "program": "/web/programs/crawler",
        "not found": "/web/jobs/no-such-job",
    }
    return paths, [run_id, log_id]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[World]:
    """The whole server with runs, an incident, jobs, a silence and a process run."""
    folder = tmp_path_factory.mktemp("world")
    data = folder / "data"
    data.mkdir()
    shutil.copy(sqlite_template, data / "watchkeeper.db")
    runtime = open_runtime(data, programs=PROGRAMS)
    app = create_app(runtime, run_sweeper=True)
    run_ids: list[str] = []
    try:
        with serve(app) as url:
            dashboard = Dashboard(url, runtime, app)
            paths, run_ids = _seed(dashboard, folder)
            yield World(dashboard, paths)
    finally:
        for run_id in run_ids:
            runtime.procs.abort(run_id, grace_s=0)
        runtime.close()


def logged_in(browser: Any, world: World, viewport: dict[str, int], **options: Any) -> Any:
    """A page in a fresh context of this size (and options), logged in as an admin."""
    context = browser.new_context(viewport=viewport, **options)
    context.set_default_timeout(WAIT_MS)
    return world.dashboard.login(context.new_page(), "ana")
