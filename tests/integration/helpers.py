"""Small helpers shared by integration tests."""

from __future__ import annotations

import asyncio

from watchkeeper.runtime import Runtime
from watchkeeper.server.app import reports_for as wired_reports
from watchkeeper.store.runs import NewRun, PushRun
from watchkeeper.watch.reports import Reports
from watchkeeper.watch.results import SweepResult


def reports_for(runtime: Runtime) -> Reports:
    """The write side of push runs on ``runtime``, wired as the app wires it."""
    return wired_reports(runtime)


def sweep(runtime: Runtime) -> SweepResult:
    """Run one sweep to the end."""
    return asyncio.run(runtime.sweeper.sweep())


def start(
    runtime: Runtime,
    run_id: str,
    kind: str = "crawl",
    *,
    budget_s: float | None = None,
    lease_s: float = 90,
    effects: str = "unknown",
    expected_s: float | None = None,
    origin: dict[str, str] | None = None,
) -> PushRun:
    """Start a push run through the same code the API uses."""
    new = NewRun(kind, run_id, f"{kind} {run_id}", origin, effects, budget_s, expected_s, lease_s)
    run, _ = reports_for(runtime).start(new)
    return run
