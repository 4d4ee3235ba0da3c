"""Which daemons are alive and what each is doing: fleets, runners and their tasks."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from watchkeeper.clock import rfc3339
from watchkeeper.queue import rules
from watchkeeper.records.queue import QueuedTask, Runner, Task


def topology(
    runners: list[Runner],
    running: list[Task],
    queued: list[QueuedTask],
    policy: rules.Policy,
    now: datetime,
) -> dict[str, Any]:
    """Fleets (with counts), and each runner with the tasks it runs now."""
    by_runner: dict[str, list[Task]] = defaultdict(list)
    for task in running:
        if task.runner_id is not None:
            by_runner[task.runner_id].append(task)
    waiting = Counter(task.fleet for task in queued)
    fleets: dict[str, dict[str, int]] = {}
    shown = []
    for runner in runners:
        alive = rules.runner_alive(runner, now, policy)
        fleet = fleets.setdefault(runner.fleet, _empty())
        fleet["runners"] += 1
        fleet["alive"] += int(alive)
        fleet["capacity"] += runner.capacity if alive else 0
        fleet["running"] += runner.running
        shown.append(_runner(runner, alive, by_runner.get(runner.id, []), now))
    for name, count in waiting.items():
        fleets.setdefault(name, _empty())["queued"] = count
    return {
        "at": rfc3339(now),
        "fleets": [{"fleet": name, **counts} for name, counts in sorted(fleets.items())],
        "runners": shown,
    }


def _empty() -> dict[str, int]:
    return {"runners": 0, "alive": 0, "capacity": 0, "running": 0, "queued": 0}


def _runner(runner: Runner, alive: bool, tasks: list[Task], now: datetime) -> dict[str, Any]:
    body = runner_json(runner, alive)
    del body["stopped_at"]  # the topology form has never carried it: clients pin its keys
    body["heartbeat_age_s"] = round((now - runner.heartbeat_at).total_seconds(), 3)
    body["tasks"] = [
        {
            "id": task.id,
            "job_id": task.job_id,
            "attempt": task.attempt,
            "leased_at": rfc3339(task.leased_at),
            "lease_expires_at": rfc3339(task.lease_expires_at),
            "progress_at": rfc3339(task.progress_at),
            "step": task.step,
        }
        for task in tasks
    ]
    return body


def runner_json(runner: Runner, alive: bool) -> dict[str, Any]:
    """A runner as the API lists it."""
    return {
        "id": runner.id,
        "name": runner.name,
        "fleet": runner.fleet,
        "org": runner.org,
        "host": runner.host,
        "pid": runner.pid,
        "capacity": runner.capacity,
        "running": runner.running,
        "alive": alive,
        "last_heartbeat_at": rfc3339(runner.heartbeat_at),
        "registered_at": rfc3339(runner.registered_at),
        "stopped_at": rfc3339(runner.stopped_at),
    }
