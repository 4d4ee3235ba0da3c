"""Decision latency under 64 concurrent pressers, and decisions per second.

What it measures: ``--incidents`` open incidents (failed push runs), decided
one after another in rounds. In each round ``--pressers`` separate processes
wait on a barrier and then press the same incident at the same moment, as a
busy channel does when everyone presses one card; exactly one press wins and
63 are told who won. The button is Dismiss, so the figures are the decision
machinery itself (read the incident, check the work's current state token,
one conditional UPDATE, record the press), not an owning system's answer
time. Latency is per press, from the barrier's release to the answer,
winners and losers together. On 2 cores, 64 processes pressing at once also
wait for a core: that wait is part of the figure.

Goal (issue 3): p99 at most 50 ms on SQLite here.

Run::

    .venv/bin/python bench/decide.py                  # SQLite
    .venv/bin/python bench/decide.py --db both --json decide.json
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as common
from watchkeeper.clock import ManualClock
from watchkeeper.decide.actors import Actor
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import reports_for
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun

FORK = multiprocessing.get_context("fork")


def prepare(url: str, folder: Path, incidents: int) -> tuple[Any, list[tuple[int, str]]]:
    """Open ``incidents`` incidents; returns the settings and (id, state token) pairs."""
    settings = common.settings_for(folder, url)
    store = Store(url)
    clock = ManualClock(common_now())
    runtime = Runtime.open(settings, clock=clock, store=store)
    reports = reports_for(runtime)
    for index in range(incidents):
        reports.start(NewRun("swarm_task", f"t{index}", "task", None, "none", None, None, 90))
        reports.fail("swarm_task", f"t{index}", "worker died", None, None)
    import asyncio

    opened = asyncio.run(runtime.sweeper.sweep()).applied.opened
    pairs = [(i, store.incidents.get(i).state_token) for i in opened]
    runtime.close()
    return settings, pairs


def common_now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def presser(settings: Any, pairs: list[tuple[int, str]], name: str, barrier: Any, out: Any) -> None:
    """One process: in every round, press that round's incident as soon as the barrier opens."""
    runtime = Runtime.open(settings, store=Store(settings.resolved_database_url, migrate=False))
    actor = Actor(name, "slack", True)
    latencies, wins = [], 0
    for incident_id, token in pairs:
        barrier.wait(timeout=300)
        started = time.perf_counter()
        result = runtime.decider.press(incident_id, "dismiss", token, actor)
        latencies.append(time.perf_counter() - started)
        wins += result.won
    out.put((latencies, wins, time.perf_counter()))
    runtime.close()


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Everything for one database."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-decide-") as folder,
        common.database(backend, Path(folder)) as url,
    ):
        settings, pairs = prepare(url, Path(folder), args.incidents)
        barrier, out = FORK.Barrier(args.pressers), FORK.Queue()
        processes = [
            FORK.Process(target=presser, args=(settings, pairs, f"@p{i}", barrier, out))
            for i in range(args.pressers)
        ]
        started = time.perf_counter()
        for process in processes:
            process.start()
        results = [out.get(timeout=600) for _ in processes]
        for process in processes:
            process.join(timeout=60)
    finished = max(r[2] for r in results)
    latencies = [value for r in results for value in r[0]]
    wins = sum(r[1] for r in results)
    wall = finished - started
    return {
        "incidents": len(pairs),
        "pressers": args.pressers,
        "presses": len(latencies),
        "winners": wins,
        "p50_ms": common.percentile(latencies, 50) * 1000,
        "p99_ms": common.percentile(latencies, 99) * 1000,
        "max_ms": max(latencies) * 1000,
        "presses_per_s": len(latencies) / wall,
        "decisions_per_s": wins / wall,
        "wall_s": wall,
        "note": "wall time includes starting the processes and the barrier of every round",
    }


def show(backend: str, f: common.Figures) -> None:
    """Print one database's figures."""
    common.print_table(
        f"decisions, {f['pressers']} concurrent pressers ({backend})",
        [
            ("incidents", f["incidents"]),
            ("presses (all pressers)", f["presses"]),
            ("winners (must equal incidents)", f["winners"]),
            (
                "latency p50 / p99 (ms)",
                f"{f['p50_ms']:.2f} / {f['p99_ms']:.2f}  (goal p99 <= 50 ms on SQLite)",
            ),
            ("latency max (ms)", f["max_ms"]),
            ("presses/s", f["presses_per_s"]),
            ("decisions/s", f["decisions_per_s"]),
        ],
    )


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--incidents", type=int, default=100, help="incidents to decide")
    parser.add_argument("--pressers", type=int, default=64, help="concurrent processes")
    args = parser.parse_args()
    common.run_backends(args, "decide", measure, show)


if __name__ == "__main__":
    main()
