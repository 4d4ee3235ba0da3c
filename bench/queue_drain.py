"""The job queue: burn-down against pgqueuer and procrastinate, latency, recovery, explanations.

What it measures:

- Burn-down: ``--tasks`` no-op tasks drained by ``--runners`` competing
  runner processes, each an in-process lease/complete loop against the store
  (no subprocesses, no HTTP), on SQLite and on PostgreSQL; tasks per second
  from the start signal to the last runner leaving. Each runner leases up to
  ``--batch`` tasks per transaction and completes each in its own (the way the
  daemon reports). In the same run, on the same PostgreSQL: pgqueuer (one
  ``QueueManager`` per process, ``batch_size=--batch``, drain mode) and
  procrastinate (one worker per process, ``concurrency=1``, ``wait=False``)
  drain the same number of no-op jobs with the same number of processes.
- Enqueue-to-lease latency at a fixed arrival rate (``--rate`` tasks/s for
  ``--seconds``): one producer submits on a schedule, the runners poll every
  10 ms when the queue is empty; latency is ``leased_at - queued_at``.
- SIGKILL to re-lease: a runner process holds a lease (``lease_s`` 2 s,
  renewed every 0.5 s) and is killed; another runner polls every 10 ms; the
  time from the kill to its lease of the same task. It is bound by the lease:
  the rest of the lease plus at most the one-second gap between recoveries.
- Blocked reasons for ``--blocked`` queued tasks (50 orgs, 4 fleets, 20
  runners, some orgs capped): one set-based read plus the rules; median of 5.

Run::

    .venv-bench/bin/python bench/queue_drain.py                     # everything, both databases
    .venv-bench/bin/python bench/queue_drain.py --tasks 5000 --no-peers
"""

from __future__ import annotations

import sys

# This folder holds queue.py, which would shadow the standard library's queue module
# (psycopg and multiprocessing import it): look here last.
sys.path.append(sys.path.pop(0))

import argparse
import asyncio
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from sqlalchemy import select

from _common import (
    PG_ADMIN_URL,
    command_line,
    database,
    machine,
    percentile,
    print_table,
    settings_for,
    write_json,
)
from watchkeeper.clock import utcnow
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewJob, NewRunner
from watchkeeper.store import Store

FORK = mp.get_context("fork")
NOOP = {"argv": ["true"]}
HEARTBEAT_EVERY_S = 5.0


def _service(url: str, folder: Path, **overrides: Any) -> tuple[Store, QueueService]:
    store = Store(url, migrate=False)
    return store, QueueService(store, settings_for(folder, url, **overrides))


def _fill(queue: QueueService, count: int, org: str = "bench", fleet: str = "cpu") -> None:
    new = NewJob("noop", org, fleet, NOOP, "bench", lease_s=600)
    for start in range(0, count, 5000):
        queue.store.submit_many([new] * min(5000, count - start), utcnow())


# -- burn-down: ours -----------------------------------------------------------------------


def _drain(url: str, folder: Path, runner_id: str, batch: int, go: Any, poll_s: float,
           stop: Any, shared: Store | None = None) -> None:  # fmt: skip
    store = shared or Store(url, migrate=False)
    queue = QueueService(store, settings_for(folder, url))
    beat = time.monotonic()
    go.wait()
    try:
        while True:
            leases = queue.lease(runner_id, limit=batch)
            for lease in leases:
                queue.complete(lease.task.id, lease.token)
            if time.monotonic() - beat > HEARTBEAT_EVERY_S:
                queue.heartbeat(runner_id)
                beat = time.monotonic()
            if not leases:
                if stop is None or stop.is_set():
                    return
                time.sleep(poll_s)
    finally:
        if shared is None:
            store.close()


def _spawn(backend: str, target: Callable[..., None], args: tuple[Any, ...]) -> Any:
    """A runner: a thread on SQLite (one process owns the file, as the server does), a
    process on PostgreSQL (runners on several hosts)."""
    if backend == "sqlite":
        return threading.Thread(target=target, args=args)
    return FORK.Process(target=target, args=args)


def _shared(backend: str, store: Store) -> Store | None:
    """On SQLite every runner thread uses the one engine (its writer gate queues them in
    order, as in the server); on PostgreSQL each process has its own."""
    if backend == "sqlite":
        return store
    store.engine.dispose()  # no pooled connection may cross the fork
    return None


def _events(backend: str) -> tuple[Any, Any]:
    if backend == "sqlite":
        return threading.Event(), threading.Event()
    return FORK.Event(), FORK.Event()


def _runners(queue: QueueService, count: int, capacity: int, fleet: str = "cpu") -> list[str]:
    return [queue.register(NewRunner(fleet, capacity, "bench", os.getpid())).id
            for _ in range(count)]  # fmt: skip


def burn_ours(backend: str, args: argparse.Namespace, batch: int) -> float:
    """Tasks per second for our runners draining ``args.tasks`` no-op tasks."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp,
        database(backend, Path(tmp)) as url,
    ):
        folder = Path(tmp)
        store = Store(url)
        queue = QueueService(store, settings_for(folder, url))
        _fill(queue, args.tasks)
        ids = _runners(queue, args.runners, batch)
        shared = _shared(backend, store)
        go, _ = _events(backend)
        procs = [_spawn(backend, _drain, (url, folder, rid, batch, go, 0.0, None, shared))
                 for rid in ids]  # fmt: skip
        for proc in procs:
            proc.start()
        time.sleep(0.5)  # let every process connect before the start signal
        started = time.perf_counter()
        go.set()
        for proc in procs:
            proc.join()
        elapsed = time.perf_counter() - started
        left = len(queue.store.queued())
        store.close()
        assert left == 0
        assert all(getattr(proc, "exitcode", 0) == 0 for proc in procs)
    return args.tasks / elapsed


# -- burn-down: peers ----------------------------------------------------------------------


def _conninfo(url: str) -> tuple[str, str]:
    """A libpq conninfo and the search_path option for a bench schema URL."""
    base, _, query = url.partition("?")
    options = unquote(query.removeprefix("options="))
    return base.replace("postgresql+psycopg://", "postgresql://"), options


def _pgqueuer_worker(url: str, batch: int, go: Any) -> None:
    import psycopg
    from pgqueuer import PsycopgDriver, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    async def main() -> None:
        conninfo, options = _conninfo(url)
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True, options=options)
        qm = QueueManager(Queries(PsycopgDriver(conn)))

        @qm.entrypoint("noop")
        async def noop(_job: Any) -> None:
            return None

        go.wait()
        await qm.run(mode=QueueExecutionMode.drain, batch_size=batch,
                     dequeue_timeout=timedelta(seconds=1))  # fmt: skip
        await conn.close()

    asyncio.run(main())


def burn_pgqueuer(args: argparse.Namespace) -> float:
    """Jobs per second for pgqueuer draining the same number of no-op jobs."""
    import psycopg
    from pgqueuer import PsycopgDriver, Queries

    with tempfile.TemporaryDirectory() as tmp, database("postgresql", Path(tmp)) as url:
        conninfo, options = _conninfo(url)

        async def prepare() -> None:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True, options=options)
            queries = Queries(PsycopgDriver(conn))
            await queries.install(create_schema=False)
            for start in range(0, args.tasks, 5000):
                n = min(5000, args.tasks - start)
                await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
            await conn.close()

        asyncio.run(prepare())
        return _time_workers(args, lambda go: (_pgqueuer_worker, (url, args.batch, go)))


def _procrastinate_app(url: str) -> Any:
    import procrastinate

    conninfo, options = _conninfo(url)
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=conninfo, kwargs={"options": options})
    )
    app.task(name="noop")(_noop)
    return app


def _noop() -> None:
    return None


def _procrastinate_worker(url: str, go: Any) -> None:
    app = _procrastinate_app(url)
    go.wait()
    app.run_worker(wait=False, concurrency=1, install_signal_handlers=False)


def burn_procrastinate(args: argparse.Namespace) -> float:
    """Jobs per second for procrastinate draining the same number of no-op jobs."""
    with tempfile.TemporaryDirectory() as tmp, database("postgresql", Path(tmp)) as url:
        app = _procrastinate_app(url)
        with app.open():
            app.schema_manager.apply_schema()
            task = app.tasks["noop"]
            for start in range(0, args.tasks, 5000):
                task.batch_defer(*[{}] * min(5000, args.tasks - start))
        return _time_workers(args, lambda go: (_procrastinate_worker, (url, go)))


def _time_workers(
    args: argparse.Namespace, target: Callable[[Any], tuple[Any, tuple[Any, ...]]]
) -> float:
    go = FORK.Event()
    procs = []
    for _ in range(args.runners):
        function, arguments = target(go)
        procs.append(FORK.Process(target=function, args=arguments))
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # every worker connected and registered its task
    started = time.perf_counter()
    go.set()
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - started
    if any(proc.exitcode != 0 for proc in procs):
        raise RuntimeError("a worker failed")
    return args.tasks / elapsed


# -- latency at a fixed arrival rate -------------------------------------------------------


def latency(backend: str, args: argparse.Namespace) -> dict[str, float]:
    """Enqueue-to-lease latency percentiles (ms) at ``args.rate`` tasks per second."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp,
        database(backend, Path(tmp)) as url,
    ):
        folder = Path(tmp)
        store = Store(url)
        queue = QueueService(store, settings_for(folder, url))
        ids = _runners(queue, args.runners, 10)
        shared = _shared(backend, store)
        go, stop = _events(backend)
        procs = [_spawn(backend, _drain, (url, folder, rid, 10, go, 0.01, stop, shared))
                 for rid in ids]  # fmt: skip
        for proc in procs:
            proc.start()
        go.set()
        total = int(args.rate * args.seconds)
        new = NewJob("noop", "bench", "cpu", NOOP, "bench", lease_s=600)
        begin = time.monotonic()
        for i in range(total):
            delay = begin + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            queue.store.submit_many([new], utcnow())
        while queue.store.queued():
            time.sleep(0.05)
        stop.set()
        for proc in procs:
            proc.join()
        from watchkeeper.store.schema_queue import queue_tasks

        with store.engine.connect() as conn:
            rows = conn.execute(select(queue_tasks.c.leased_at - queue_tasks.c.queued_at)).all()
        store.close()
    waits = [row[0] * 1000 for row in rows]
    return {"p50_ms": percentile(waits, 50), "p99_ms": percentile(waits, 99),
            "max_ms": max(waits), "tasks": float(len(waits))}  # fmt: skip


# -- SIGKILL to re-lease -------------------------------------------------------------------


def hold(url: str, folder: str, runner_id: str) -> None:
    """Child role: lease one task, say so, renew until killed."""
    _store, queue = _service(url, Path(folder))
    [lease] = queue.lease(runner_id)
    print(lease.task.id, flush=True)
    while True:
        time.sleep(0.5)
        queue.renew(lease.task.id, lease.token)


def relapse(backend: str, reps: int) -> list[float]:
    """Seconds from a holding runner's SIGKILL to another runner leasing its task."""
    found = []
    with (
        tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp,
        database(backend, Path(tmp)) as url,
    ):
        folder = Path(tmp)
        Store(url).close()  # migrate
        store, queue = _service(url, folder)
        for _ in range(reps):
            queue.submit("held", org="bench", fleet="cpu", payload=NOOP, submitted_by="bench",
                         lease_s=2.0, max_attempts=100)  # fmt: skip
            [holder, taker] = _runners(queue, 2, 1)
            child = subprocess.Popen(
                [sys.executable, __file__, "--role", "hold", url, str(folder), holder],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert child.stdout is not None
            task_id = child.stdout.readline().strip()
            time.sleep(0.7)  # it renewed at least once: the lease counts from a renewal
            killed = time.perf_counter()
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
            while True:
                leases = queue.lease(taker)
                if leases:
                    assert leases[0].task.id == task_id
                    found.append(time.perf_counter() - killed)
                    queue.complete(leases[0].task.id, leases[0].token)
                    break
                time.sleep(0.01)
        store.close()
    return found


# -- blocked reasons -----------------------------------------------------------------------


def blocked(backend: str, count: int) -> dict[str, float]:
    """Median seconds to explain ``count`` queued tasks, and the reasons found."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp,
        database(backend, Path(tmp)) as url,
    ):
        folder = Path(tmp)
        orgs = {f"org{i}": {"max_concurrent_jobs": 1, "monthly_agent_minutes": 1000}
                for i in range(0, 50, 5)}  # fmt: skip
        store = Store(url)
        queue = QueueService(store, settings_for(folder, url, orgs=orgs))
        news = [
            NewJob("noop", f"org{i % 50}", f"fleet{i % 4}", NOOP, "bench") for i in range(count)
        ]
        for start in range(0, count, 5000):
            queue.store.submit_many(news[start : start + 5000], utcnow())
        for i in range(20):
            queue.register(NewRunner(f"fleet{i % 3}", 2, "bench", i))
        times, reasons = [], {}
        for _ in range(5):
            started = time.perf_counter()
            found = queue.blocked()
            times.append(time.perf_counter() - started)
            reasons = found
        store.close()
    codes: dict[str, float] = {}
    for reason in reasons.values():
        codes[reason.code.value] = codes.get(reason.code.value, 0) + 1
    return {"median_s": statistics.median(times), "tasks": float(len(reasons)), **codes}


# -- main ----------------------------------------------------------------------------------


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--role":
        hold(*sys.argv[3:6])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--runners", type=int, default=8)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--blocked", type=int, default=10_000)
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--no-peers", action="store_true", help="skip pgqueuer and procrastinate")
    parser.add_argument("--batch1", action="store_true", help="also burn down leasing 1 at a time")
    parser.add_argument("--only-burn", action="store_true", help="burn-down figures only")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    backends = ("sqlite", "postgresql") if args.db == "both" else (args.db,)
    results: dict[str, Any] = {}
    for backend in backends:
        figures: dict[str, Any] = {}
        figures["burn_tasks_per_s"] = burn_ours(backend, args, args.batch)
        if args.batch1:
            figures["burn_tasks_per_s_batch1"] = burn_ours(backend, args, 1)
        if not args.only_burn:
            figures["latency"] = latency(backend, args)
            kills = relapse(backend, args.kills)
            figures["sigkill_to_relase_s"] = {"median": statistics.median(kills),
                                              "max": max(kills)}  # fmt: skip
            figures["blocked"] = blocked(backend, args.blocked)
        results[backend] = figures
        _show(backend, args, figures)
    if "postgresql" in backends and not args.no_peers:
        results["peers"] = _peers(args)
    payload = {"benchmark": "queue", "command": command_line(),
               "machine": machine(PG_ADMIN_URL), "results": results}  # fmt: skip
    write_json(args.json, payload)
    print(f"\ncommand: {payload['command']}")


def _peers(args: argparse.Namespace) -> dict[str, Any]:
    peers: dict[str, Any] = {}
    for name, function in (("pgqueuer", burn_pgqueuer), ("procrastinate", burn_procrastinate)):
        try:
            peers[name] = function(args)
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run is reported, not hidden
            peers[name] = f"could not run: {type(exc).__name__}: {exc}"
    print_table(
        f"Burn-down on PostgreSQL, {args.tasks:,} no-op jobs, {args.runners} processes (jobs/s)",
        list(peers.items()),
    )
    return peers


def _show(backend: str, args: argparse.Namespace, figures: dict[str, Any]) -> None:
    rows: list[tuple[str, object]] = [
        (f"burn-down, {args.runners} runners, batch {args.batch} (tasks/s)",
         figures["burn_tasks_per_s"]),
    ]  # fmt: skip
    if "burn_tasks_per_s_batch1" in figures:
        rows.append((f"burn-down, {args.runners} runners, batch 1 (tasks/s)",
                     figures["burn_tasks_per_s_batch1"]))  # fmt: skip
    if "latency" in figures:
        lat, kill, why = figures["latency"], figures["sigkill_to_relase_s"], figures["blocked"]
        rows += [
            (f"enqueue-to-lease p50 at {args.rate:g}/s (ms)", lat["p50_ms"]),
            (f"enqueue-to-lease p99 at {args.rate:g}/s (ms)", lat["p99_ms"]),
            ("SIGKILL to re-lease, lease 2 s, median (s)", kill["median"]),
            ("SIGKILL to re-lease, lease 2 s, max (s)", kill["max"]),
            (f"blocked reasons for {int(why['tasks']):,} queued tasks, median (s)",
             why["median_s"]),
        ]  # fmt: skip
    print_table(f"watchkeeper queue on {backend}", rows)


if __name__ == "__main__":
    main()
