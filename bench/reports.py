"""Progress reports per second: over HTTP from a cheap load generator, and in-process.

What it measures:

- HTTP: a real ``watchkeeper serve`` (its own process, a temporary data folder,
  a reporter token made with ``watchkeeper token create``) on 127.0.0.1. The
  load generator is ``--generators`` asyncio processes (default 1) sharing
  ``--connections`` keep-alive HTTP/1.1 connections (default 32) of raw streams:
  requests built by hand as bytes, of the answer only the status line and
  ``Content-Length`` read. Each connection posts a distinct step to
  ``/api/v1/runs/{kind}/{run_id}/progress`` of runs of its own with the real
  token, one request at a time, for ``--duration`` seconds. (A client library
  spent more CPU per request than the server, on the same cores: the rate
  measured the clients.) Reported: requests per second, p50/p99 latency,
  errors, the server's CPU in the window (cores, per report), the generator's.
- The peer: a minimal FastAPI app (one route, one ``UPDATE`` per request on a
  SQLite table of the same shape as ``push_runs``, no authentication) served
  under the same uvicorn settings as ``serve`` (:func:`server_config`), driven
  by the same generator. The two servers take turns, ``--rounds`` times
  (which goes first alternates), so drift in the machine falls on both; each
  round gives the ratios ours/peer of the rate and of the server CPU per report,
  printed as min / median / max.
- In-process: ``reports_for(runtime).progress(...)`` called directly from eight
  threads, no HTTP, for the same duration.

Goal (issue 2): 2,000 progress reports per second over HTTP on SQLite, at most
1.3x the peer's server CPU per report.

Run::

    .venv/bin/python bench/reports.py --duration 5 --rounds 3    # SQLite
    .venv/bin/python bench/reports.py --db both --duration 10 --rounds 5 --json reports.json
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil

import _common as common
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import reports_for
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.watch.reports import Reports

KINDS = ("chat_turn", "swarm_task", "document_job", "research_session", "crawl")
#: Threads calling ``Reports.progress`` in the in-process measurement.
INPROCESS_THREADS = 8


@dataclass(frozen=True)
class Job:
    """One generator process's share: its connections' runs, when to begin and for how long."""

    base_url: str
    token: str
    #: Per connection: its kind and its runs.
    connections: tuple[tuple[str, tuple[str, ...]], ...]
    start_at: float
    duration_s: float


@dataclass
class Tally:
    """What one client (or generator process) saw."""

    ok: int = 0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    #: The generator process's own CPU during the window, in seconds.
    cpu_s: float = 0.0


def run_ids_for(client: int, per_client: int) -> tuple[str, ...]:
    """The run ids client (connection) number ``client`` reports on."""
    return tuple(f"bench-{client:03d}-{n:04d}" for n in range(per_client))


def loop_for(duration_s: float, start_at: float, report: Callable[[int], bool]) -> Tally:
    """Call ``report(n)`` back to back from ``start_at`` for ``duration_s``; time each call."""
    tally = Tally()
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


# -- over HTTP: the load generator ---------------------------------------------------------------


def generator(job: Job) -> Tally:
    """One generator process: an event loop driving its connections; its CPU in the window."""
    try:
        import uvloop  # the cheapest loop at hand: the generator's CPU is not what we measure
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        return asyncio.run(_generate(job))
    return uvloop.run(_generate(job))


async def _generate(job: Job) -> Tally:
    url = urlsplit(job.base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    streams = [await asyncio.open_connection(host, port) for _ in job.connections]
    tally = Tally()
    delay = job.start_at - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    cpu_before = time.process_time()
    end = time.perf_counter() + job.duration_s
    head = (
        f"Host: {url.netloc}\r\nAuthorization: Bearer {job.token}\r\n"
        "Content-Type: application/json\r\n"
    ).encode()
    await asyncio.gather(
        *(
            _connection(reader, writer, head, kind, runs, end, tally)
            for (reader, writer), (kind, runs) in zip(streams, job.connections, strict=True)
        )
    )
    tally.cpu_s = time.process_time() - cpu_before
    for _, writer in streams:
        writer.close()
    return tally


async def _connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    head: bytes,
    kind: str,
    runs: tuple[str, ...],
    end: float,
    tally: Tally,
) -> None:
    """Keep-alive posts on one connection, one at a time, each a distinct step of a real run."""
    paths = [f"POST /api/v1/runs/{kind}/{run_id}/progress HTTP/1.1\r\n".encode() for run_id in runs]
    latencies = tally.latencies_ms
    clock = time.perf_counter
    n = 0
    while (began := clock()) < end:
        body = b'{"step":"step %d"}' % n
        writer.write(
            b"%s%sContent-Length: %d\r\n\r\n%s" % (paths[n % len(paths)], head, len(body), body)
        )
        answer = await reader.readuntil(b"\r\n\r\n")
        length = _content_length(answer)
        if length:
            await reader.readexactly(length)
        latencies.append((clock() - began) * 1000)
        if answer.startswith(b"HTTP/1.1 200 "):
            tally.ok += 1
        else:
            tally.errors += 1
        n += 1


def _content_length(head: bytes) -> int:
    """The ``Content-Length`` of an answer's head (0 when it has none)."""
    at = head.lower().find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    stop = head.index(b"\r\n", at + 2)
    return int(head[at + 17 : stop])


def http_rate(url: str, folder: Path, args: argparse.Namespace) -> common.Figures:
    """Start our server and the peer, prepare the runs, then load each in turn, in rounds."""
    with common.serve(url, folder) as server, peer_server(folder / "peer", args) as peer_url:
        with httpx.Client(base_url=server.base_url, headers=server.headers) as client:
            for i in range(args.connections):
                common.start_runs(client, KINDS[i % len(KINDS)], run_ids_for(i, args.runs))
        peer_pid = int((folder / "peer" / "pid").read_text(encoding="utf-8"))
        ours: list[common.Figures] = []
        peers: list[common.Figures] = []
        for round_no in range(args.rounds):
            turns = [
                (ours, server.base_url, server.token, server.pid),
                (peers, peer_url, "wk_unchecked", peer_pid),
            ]
            for out, base_url, token, pid in turns if round_no % 2 == 0 else turns[::-1]:
                out.append(http_window(base_url, token, pid, args))
    return {"ours": ours, "peer": peers, "ratios": ratios(ours, peers)}


def http_window(base_url: str, token: str, pid: int, args: argparse.Namespace) -> common.Figures:
    """The generator posts to ``base_url`` for ``--duration``; the server's CPU meanwhile."""
    start_at = time.time() + 3.0  # room for the generator processes to start and connect
    shares: list[list[tuple[str, tuple[str, ...]]]] = [[] for _ in range(args.generators)]
    for i in range(args.connections):
        shares[i % args.generators].append((KINDS[i % len(KINDS)], run_ids_for(i, args.runs)))
    jobs = [Job(base_url, token, tuple(share), start_at, args.duration) for share in shares]
    server_process = psutil.Process(pid)
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.generators) as pool:
        pending = pool.map_async(generator, jobs)
        while time.time() < start_at:
            time.sleep(0.01)
        cpu_before = _cpu_seconds(server_process)
        # Generous: on a loaded machine the generator processes take long to start.
        tallies = pending.get(timeout=args.duration + 300)
        cpu_after = _cpu_seconds(server_process)
    figures = summarise(tallies, args.duration)
    cpu_s = cpu_after - cpu_before
    requests = max(figures["requests_ok"] + figures["errors"], 1)
    figures["server_cpu_cores"] = cpu_s / args.duration
    figures["server_cpu_us_per_report"] = cpu_s / max(figures["requests_ok"], 1) * 1e6
    figures["generator_cpu_us_per_request"] = sum(t.cpu_s for t in tallies) / requests * 1e6
    return figures


def ratios(ours: list[common.Figures], peers: list[common.Figures]) -> common.Figures:
    """Per round, ours over the peer's: rate and server CPU per report (min, median, max)."""
    rate = [o["per_second"] / p["per_second"] for o, p in zip(ours, peers, strict=True)]
    cpu = [
        o["server_cpu_us_per_report"] / p["server_cpu_us_per_report"]
        for o, p in zip(ours, peers, strict=True)
    ]
    return {"rate": spread(rate), "cpu_per_report": spread(cpu)}


def spread(values: list[float]) -> dict[str, float]:
    """Min, median and max of ``values``."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


# -- the peer: a minimal FastAPI + SQLite endpoint ------------------------------------------------

PEER_UPDATE = (
    "UPDATE push_runs SET progress_at = ?, step = ?, status = 'running', seen_at = ?, "
    "updated_at = ?, version = version + 1 WHERE run_id = ? AND kind = ?"
)


def peer_app(db_path: str) -> Any:
    """One route, one UPDATE per request on a connection per worker thread; nothing else."""
    from fastapi import Body, FastAPI, HTTPException

    app = FastAPI()
    local = threading.local()

    def connection() -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA synchronous = NORMAL")
            local.conn = conn
        return conn

    @app.post("/api/v1/runs/{kind}/{run_id}/progress")
    def progress(kind: str, run_id: str, body: dict[str, Any] | None = Body(None)) -> Any:
        now = time.time()
        step = (body or {}).get("step")
        cursor = connection().execute(PEER_UPDATE, (now, step, now, now, run_id, kind))
        if cursor.rowcount != 1:
            raise HTTPException(404, f"no {kind} run {run_id!r}")
        return {"kind": kind, "run_id": run_id, "step": step, "progress_at": now}

    return app


def peer_main(db_path: str, port: int) -> None:
    """Serve :func:`peer_app` as ``watchkeeper serve`` serves its app."""
    from watchkeeper.server.http.protocol import Server, server_config

    Server(server_config(peer_app(db_path), "127.0.0.1", port, log_level="info")).run()


@contextmanager
def peer_server(folder: Path, args: argparse.Namespace) -> Iterator[str]:
    """The peer on a free port, its table made like ``push_runs`` with the same runs in it."""
    from sqlalchemy import create_engine, insert

    from watchkeeper.store.schema import push_runs

    folder.mkdir(parents=True)
    db_path = folder / "peer.db"
    engine = create_engine(f"sqlite:///{db_path}")
    push_runs.create(engine)
    now = time.time()
    rows = [
        {
            "run_id": run_id,
            "kind": KINDS[i % len(KINDS)],
            "title": run_id,
            "status": "running",
            "attempt": 1,
            "version": 1,
            "effects": "unknown",
            "lease_s": 90.0,
            "started_at": now,
            "progress_at": now,
            "seen_at": now,
            "updated_at": now,
        }
        for i in range(args.connections)
        for run_id in run_ids_for(i, args.runs)
    ]
    with engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA journal_mode = WAL")
        conn.execute(insert(push_runs), rows)
    engine.dispose()
    port = common.free_port()
    log = folder / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, __file__, "--peer-serve", str(db_path), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        (folder / "pid").write_text(str(process.pid), encoding="utf-8")
        base_url = f"http://127.0.0.1:{port}"
        try:
            common._wait_ready(base_url, process, log)
            yield base_url
        finally:
            common._stop(process)


# -- in-process ----------------------------------------------------------------------------------


def inprocess_rate(url: str, folder: Path, args: argparse.Namespace) -> common.Figures:
    """Threads call ``Reports.progress`` directly on one runtime."""
    store = Store(url)
    runtime = Runtime.open(common.settings_for(folder, url), store=store)
    try:
        reports = reports_for(runtime)
        for i in range(INPROCESS_THREADS):
            for run_id in run_ids_for(i, args.runs):
                kind = KINDS[i % len(KINDS)]
                reports.start(NewRun(kind, run_id, run_id, None, "unknown", None, None, 90.0))
        start_at = time.time() + 0.5
        tallies: list[Tally] = [Tally() for _ in range(INPROCESS_THREADS)]
        threads = [
            threading.Thread(
                target=_inprocess_client,
                args=(reports, i, args, start_at, tallies),
                name=f"client-{i}",
            )
            for i in range(INPROCESS_THREADS)
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
    latencies = [value for tally in tallies for value in tally.latencies_ms]
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
    results: dict[str, Any] = {
        "connections": args.connections,
        "generators": args.generators,
        "duration_s": args.duration,
        "rounds": args.rounds,
    }
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
    rows: list[tuple[str, object]] = []
    for n, (ours, peer) in enumerate(zip(http["ours"], http["peer"], strict=True), 1):
        for who, fig in (("ours", ours), ("peer", peer)):
            rows.append(
                (
                    f"round {n} {who}",
                    f"{fig['per_second']:,.0f}/s  p50 {fig['p50_ms']:.2f} ms  "
                    f"p99 {fig['p99_ms']:.2f} ms  errors {fig['errors']}  "
                    f"CPU {fig['server_cpu_cores']:.2f} cores  "
                    f"{fig['server_cpu_us_per_report']:.0f} us/report  "
                    f"generator {fig['generator_cpu_us_per_request']:.0f} us/request",
                )
            )
    rate, cpu = http["ratios"]["rate"], http["ratios"]["cpu_per_report"]
    best = max(fig["per_second"] for fig in http["ours"])
    rows += [
        ("ours/peer rate (min/med/max)", _spread(rate)),
        ("ours/peer CPU/report (min/med/max)", _spread(cpu) + "  (goal <= 1.30)"),
        ("ours best reports/s", f"{best:,.0f}  (goal >= 2,000 on SQLite)"),
        ("in-process reports/s", f"{local['per_second']:,.0f}"),
        ("in-process p50 / p99 (ms)", f"{local['p50_ms']:.2f} / {local['p99_ms']:.2f}"),
        ("in-process errors", local["errors"]),
    ]
    common.print_table(
        f"progress reports over HTTP, {f['connections']} connections from "
        f"{f['generators']} generator process(es), {f['duration_s']:g} s windows, "
        f"ours ({backend}) against a minimal FastAPI + SQLite peer",
        rows,
    )


def _spread(values: dict[str, float]) -> str:
    return f"{values['min']:.2f} / {values['median']:.2f} / {values['max']:.2f}"


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections")
    parser.add_argument("--generators", type=int, default=1, help="load generator processes")
    parser.add_argument("--runs", type=int, default=20, help="runs per connection")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load")
    parser.add_argument("--rounds", type=int, default=3, help="turns of ours and the peer")
    parser.add_argument("--peer-serve", metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer_serve:
        peer_main(args.peer_serve, args.port)
        return
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not 1 <= args.generators <= args.connections:
        parser.error("--generators must be between 1 and --connections")
    common.run_backends(args, "reports", measure, show)


if __name__ == "__main__":
    main()
