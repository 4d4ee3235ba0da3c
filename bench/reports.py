"""Progress reports per second: over HTTP from 8 client processes, and in-process from 8 threads.

What it measures:

- HTTP: a real ``watchkeeper serve`` (its own process, a temporary data folder
  and configuration, a reporter token made with ``watchkeeper token create``)
  on 127.0.0.1. Eight client processes, each with one keep-alive
  ``httpx.Client``, post ``/api/v1/runs/{kind}/{run_id}/progress`` in a loop
  over runs of their own (started beforehand) for ``--duration`` seconds.
  Reported: requests per second, p50/p99 latency, errors, and the CPU the
  server process used during the window (in cores).
- In-process: ``reports_for(runtime).progress(...)`` called directly from eight
  threads, no HTTP, for the same duration.

Goal (issue 2): 2,000 progress reports per second over HTTP on SQLite.

Run::

    .venv/bin/python bench/reports.py                          # SQLite
    .venv/bin/python bench/reports.py --db both --duration 10 --json reports.json
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

import _common as common
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import reports_for
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.watch.reports import Reports

KINDS = ("chat_turn", "swarm_task", "document_job", "research_session", "crawl")


@dataclass(frozen=True)
class Job:
    """One client's share: its runs, when to begin and for how long."""

    base_url: str
    token: str
    kind: str
    run_ids: tuple[str, ...]
    start_at: float
    duration_s: float


@dataclass
class Tally:
    """What one client saw."""

    ok: int = 0
    errors: int = 0
    latencies_ms: list[float] | None = None


def run_ids_for(client: int, per_client: int) -> tuple[str, ...]:
    """The run ids client number ``client`` reports on."""
    return tuple(f"bench-{client:02d}-{n:04d}" for n in range(per_client))


def loop_for(duration_s: float, start_at: float, report: Callable[[int], bool]) -> Tally:
    """Call ``report(n)`` back to back from ``start_at`` for ``duration_s``; time each call."""
    tally = Tally(latencies_ms=[])
    assert tally.latencies_ms is not None
    while time.time() < start_at:
        time.sleep(0.001)
    end = time.perf_counter() + duration_s
    n = 0
    while True:
        began = time.perf_counter()
        if began >= end:
            break
        ok = report(n)
        tally.latencies_ms.append((time.perf_counter() - began) * 1000)
        if ok:
            tally.ok += 1
        else:
            tally.errors += 1
        n += 1
    return tally


# -- over HTTP -----------------------------------------------------------------------------------


def http_client(job: Job) -> Tally:
    """One client process: keep-alive posts of progress on its own runs."""
    headers = {"Authorization": f"Bearer {job.token}"}
    with httpx.Client(base_url=job.base_url, headers=headers, timeout=30.0) as client:
        client.post(f"/api/v1/runs/{job.kind}/{job.run_ids[0]}/progress", json={})  # connect

        def report(n: int) -> bool:
            run_id = job.run_ids[n % len(job.run_ids)]
            try:
                response = client.post(
                    f"/api/v1/runs/{job.kind}/{run_id}/progress", json={"step": f"step {n}"}
                )
            except httpx.HTTPError:
                return False
            return response.status_code == 200

        return loop_for(job.duration_s, job.start_at, report)


def http_rate(url: str, folder: Path, args: argparse.Namespace) -> common.Figures:
    """Start a server, prepare the runs, then let the client processes loose."""
    with common.serve(url, folder) as server:
        with httpx.Client(base_url=server.base_url, headers=server.headers) as client:
            for i in range(args.clients):
                common.start_runs(client, KINDS[i % len(KINDS)], run_ids_for(i, args.runs))
        start_at = time.time() + 3.0  # room for the clients to start and connect
        jobs = [
            Job(
                server.base_url,
                server.token,
                KINDS[i % len(KINDS)],
                run_ids_for(i, args.runs),
                start_at,
                args.duration,
            )
            for i in range(args.clients)
        ]
        server_process = psutil.Process(server.pid)
        context = multiprocessing.get_context("spawn")
        with context.Pool(args.clients) as pool:
            pending = pool.map_async(http_client, jobs)
            while time.time() < start_at:
                time.sleep(0.01)
            cpu_before = _cpu_seconds(server_process)
            tallies = pending.get(timeout=args.duration + 60)
            cpu_after = _cpu_seconds(server_process)
    figures = summarise(tallies, args.duration)
    figures["server_cpu_cores"] = (cpu_after - cpu_before) / args.duration
    return figures


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


# -- in-process ----------------------------------------------------------------------------------


def inprocess_rate(url: str, folder: Path, args: argparse.Namespace) -> common.Figures:
    """Eight threads call ``Reports.progress`` directly on one runtime."""
    store = Store(url)
    runtime = Runtime.open(common.settings_for(folder, url), store=store)
    try:
        reports = reports_for(runtime)
        for i in range(args.clients):
            for run_id in run_ids_for(i, args.runs):
                kind = KINDS[i % len(KINDS)]
                reports.start(NewRun(kind, run_id, run_id, None, "unknown", None, None, 90.0))
        start_at = time.time() + 0.5
        tallies: list[Tally] = [Tally() for _ in range(args.clients)]
        threads = [
            threading.Thread(
                target=_inprocess_client,
                args=(reports, i, args, start_at, tallies),
                name=f"client-{i}",
            )
            for i in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        runtime.close()
    return summarise(tallies, args.duration)


def _inprocess_client(
    reports: Reports, index: int, args: argparse.Namespace, start_at: float, out: list[Tally]
) -> None:
    kind = KINDS[index % len(KINDS)]
    run_ids = run_ids_for(index, args.runs)

    def report(n: int) -> bool:
        reports.progress(kind, run_ids[n % len(run_ids)], f"step {n}", None)
        return True

    out[index] = loop_for(args.duration, start_at, report)


# -- figures -------------------------------------------------------------------------------------


def summarise(tallies: list[Tally], duration_s: float) -> common.Figures:
    """Rate and latency percentiles over every client."""
    latencies = [value for tally in tallies for value in (tally.latencies_ms or [])]
    ok = sum(tally.ok for tally in tallies)
    return {
        "requests_ok": ok,
        "errors": sum(tally.errors for tally in tallies),
        "per_second": ok / duration_s,
        "p50_ms": common.percentile(latencies, 50),
        "p99_ms": common.percentile(latencies, 99),
        "max_ms": max(latencies, default=float("nan")),
    }


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Both ways on one database, each on a fresh one."""
    results: dict[str, Any] = {"clients": args.clients, "duration_s": args.duration}
    with (
        tempfile.TemporaryDirectory(prefix="wk-reports-") as folder,
        common.database(backend, Path(folder)) as url,
    ):
        results["http"] = http_rate(url, Path(folder), args)
    with (
        tempfile.TemporaryDirectory(prefix="wk-reports-") as folder,
        common.database(backend, Path(folder)) as url,
    ):
        results["in_process"] = inprocess_rate(url, Path(folder), args)
    return results


def show(backend: str, f: common.Figures) -> None:
    """Print one database's figures."""
    http, local = f["http"], f["in_process"]
    goal = "  (goal >= 2,000/s on SQLite)"
    common.print_table(
        f"progress reports, {f['clients']} clients for {f['duration_s']:g} s ({backend})",
        [
            ("HTTP reports/s", f"{http['per_second']:,.0f}{goal}"),
            ("HTTP p50 / p99 (ms)", f"{http['p50_ms']:.2f} / {http['p99_ms']:.2f}"),
            ("HTTP max (ms)", http["max_ms"]),
            ("HTTP errors", http["errors"]),
            ("server CPU (cores)", http["server_cpu_cores"]),
            ("in-process reports/s", f"{local['per_second']:,.0f}"),
            ("in-process p50 / p99 (ms)", f"{local['p50_ms']:.2f} / {local['p99_ms']:.2f}"),
            ("in-process errors", local["errors"]),
        ],
    )


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--runs", type=int, default=20, help="runs per client")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load")
    args = parser.parse_args()
    common.run_backends(args, "reports", measure, show)


if __name__ == "__main__":
    main()
