"""The job queue: burn-down against pgqueuer and procrastinate, latency, recovery, explanations.

What it measures:

- Burn-down: ``--tasks`` no-op tasks drained by ``--runners`` competing
  workers, on SQLite and on PostgreSQL, in ``--rounds`` interleaved rounds
  (each round runs every system once, in turn). Watchkeeper twice: in-process
  (a lease/complete loop on the store, no HTTP) and through ``watchkeeper
  serve`` (runner processes leasing and completing over HTTP with the
  client). Each leases up to ``--batch`` tasks per call and reports their
  outcomes with its next lease, in one call and one transaction (the way the
  daemon reports tasks that end in the same pass with the lease that fills
  their slots). On the same PostgreSQL: pgqueuer (one
  ``QueueManager`` per process, ``batch_size=--batch``, drain mode) and
  procrastinate (one worker per process, ``concurrency=1``, ``wait=False``).
  Every system's tables are analyzed after filling. The clock runs from the
  start signal to the system's last completion as its own table records it
  (not to its workers' exit: pgqueuer's idle in 1 s steps before they leave).
  Beside each rate: CPU per task of the workers (and of the server, over
  HTTP), and of the local PostgreSQL's processes (the whole server, so
  anything else it runs meanwhile counts too). Rates and the ratios of ours to
  each peer (per round) are given as min / median / max.
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
    .venv-bench/bin/python bench/queue_drain.py --tasks 500 --rounds 1 --only-burn   # a quick check
"""

from __future__ import annotations

import sys

# This folder holds queue.py, which would shadow the standard library's queue module
# (psycopg and multiprocessing import it): look here last.
sys.path.append(sys.path.pop(0))

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import resource
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import psutil
from sqlalchemy import select

from _common import (
    PG_ADMIN_URL,
    command_line,
    database,
    machine,
    percentile,
    print_table,
    serve,
    settings_for,
    write_json,
)
from watchkeeper.clock import utcnow
from watchkeeper.queue.service import End, QueueService
from watchkeeper.records.queue import NewJob, NewRunner, TaskStatus
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


# -- burn-down: what every system shares ----------------------------------------------------


@dataclass
class Drained:
    """One system's drain of ``tasks`` no-op tasks in one round.

    The clock starts at the start signal and stops at the system's last
    completion as its own table records it, not when its workers exit: a peer's
    workers may idle a while before they notice the queue is empty. CPU is the
    seconds the workers (and watchkeeper's server, over HTTP) spent, per task;
    PostgreSQL's is every ``postgres`` process of the local server, so it also
    counts anything else that server did meanwhile.
    """

    tasks: int
    seconds: float
    cpu_s: float
    pg_cpu_s: float | None
    #: Of ``cpu_s``, what watchkeeper's server spent (over HTTP only).
    server_cpu_s: float | None = None

    @property
    def rate(self) -> float:
        """Tasks per second."""
        return self.tasks / self.seconds

    @property
    def cpu_ms_per_task(self) -> float:
        """Worker (and server) CPU milliseconds per task."""
        return 1000 * self.cpu_s / self.tasks

    @property
    def server_cpu_ms_per_task(self) -> float | None:
        """The server's CPU milliseconds per task, over HTTP."""
        return None if self.server_cpu_s is None else 1000 * self.server_cpu_s / self.tasks

    @property
    def pg_cpu_ms_per_task(self) -> float | None:
        """PostgreSQL CPU milliseconds per task, when its processes are on this machine."""
        return None if self.pg_cpu_s is None else 1000 * self.pg_cpu_s / self.tasks


def _rusage_s(who: int) -> float:
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def _process_cpu_s(pid: int) -> float:
    """CPU seconds of a process and of its children, live and reaped."""
    process = psutil.Process(pid)
    times = process.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child_times = child.cpu_times()
            total += child_times.user + child_times.system
    return total


def _postgres_cpu_s() -> float | None:
    """CPU seconds of the local PostgreSQL's processes, the exited backends included
    (their time moves to the postmaster's reaped children)."""
    total, seen = 0.0, False
    for process in psutil.process_iter(["name"]):
        if process.info["name"] != "postgres":
            continue
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
            seen = True
    return total if seen else None


class _Meter:
    """CPU of this process's joined children (or of itself, for threads), the server, PostgreSQL."""

    def __init__(self, backend: str, *, threads: bool = False, server_pid: int | None = None):
        self.who = resource.RUSAGE_SELF if threads else resource.RUSAGE_CHILDREN
        self.server_pid = server_pid
        self.pg = backend == "postgresql"
        self.began = self._read()

    def _read(self) -> tuple[float, float, float | None]:
        server = 0.0 if self.server_pid is None else _process_cpu_s(self.server_pid)
        return _rusage_s(self.who), server, _postgres_cpu_s() if self.pg else None

    def server_spent(self) -> float:
        """CPU seconds of the server alone since the meter started."""
        return _process_cpu_s(self.server_pid) - self.began[1] if self.server_pid else 0.0

    def spent(self) -> tuple[float, float | None]:
        """CPU seconds of the workers and server, and of PostgreSQL, since the meter started."""
        ended = self._read()
        pg = None if ended[2] is None or self.began[2] is None else ended[2] - self.began[2]
        return (ended[0] - self.began[0]) + (ended[1] - self.began[1]), pg


def _analyze(url: str) -> None:
    """Fresh planner statistics on every table of the database, as each system gets them."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "sqlite":
                conn.execute(text("ANALYZE"))
                return
            names = conn.execute(
                text(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
                )
            ).scalars()
            for name in list(names):
                conn.execute(text(f'ANALYZE "{name}"'))
    finally:
        engine.dispose()


def _last_at(url: str, sql: str) -> float:
    """The epoch of a system's last completion, read from its own table."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            value = conn.execute(text(sql)).scalar()
    finally:
        engine.dispose()
    if value is None:
        raise RuntimeError(f"no completion recorded ({sql})")
    return float(value)


# -- burn-down: ours -----------------------------------------------------------------------


def _drain(url: str, folder: Path, runner_id: str, batch: int, go: Any, poll_s: float,
           stop: Any, shared: Store | None = None) -> None:  # fmt: skip
    store = shared or Store(url, migrate=False)
    queue = QueueService(store, settings_for(folder, url))
    beat = time.monotonic()
    go.wait()
    ends: list[End] = []
    try:
        while True:
            # The last batch's outcomes go with the next lease: one transaction a batch.
            _, leases = queue.report_and_lease(runner_id, ends, batch)
            ends = [End(x.task.id, x.token, TaskStatus.SUCCEEDED) for x in leases]
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


LAST_OURS = "SELECT MAX(finished_at) FROM queue_tasks"


def burn_ours(backend: str, args: argparse.Namespace, batch: int) -> Drained:
    """Our runners draining ``args.tasks`` no-op tasks in-process (store calls, no HTTP)."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp,
        database(backend, Path(tmp)) as url,
    ):
        folder = Path(tmp)
        store = Store(url)
        queue = QueueService(store, settings_for(folder, url))
        _fill(queue, args.tasks)
        _analyze(url)
        ids = _runners(queue, args.runners, batch)
        shared = _shared(backend, store)
        go, _ = _events(backend)
        procs = [_spawn(backend, _drain, (url, folder, rid, batch, go, 0.0, None, shared))
                 for rid in ids]  # fmt: skip
        for proc in procs:
            proc.start()
        time.sleep(0.5)  # let every process connect before the start signal
        meter = _Meter(backend, threads=backend == "sqlite")
        started = time.time()
        go.set()
        for proc in procs:
            proc.join()
        cpu, pg = meter.spent()
        last = _last_at(url, LAST_OURS)
        left = len(queue.store.queued())
        store.close()
        assert left == 0
        assert all(getattr(proc, "exitcode", 0) == 0 for proc in procs)
    return Drained(args.tasks, last - started, cpu, pg)


def _http_drain(base_url: str, token: str, runner_id: str, batch: int, go: Any) -> None:
    from watchkeeper.client import Client

    client = Client(base_url, token, timeout=60.0)
    beat = time.monotonic()
    go.wait()
    tasks = client.runners.lease(runner_id, max=batch)
    while tasks:
        # The batch's outcomes go with the next lease, as the daemon sends them: one
        # request and one transaction a batch.
        outcomes = [{"task_id": t["id"], "lease_token": t["lease_token"], "exit_code": 0}
                    for t in tasks]  # fmt: skip
        tasks = client.runners.report_and_lease(runner_id, outcomes, max=batch)["tasks"]
        if time.monotonic() - beat > HEARTBEAT_EVERY_S:
            client.runners.heartbeat(runner_id)
            beat = time.monotonic()


def burn_ours_http(backend: str, args: argparse.Namespace, batch: int) -> Drained:
    """Runner processes draining through ``watchkeeper serve``: lease and complete over HTTP."""
    from watchkeeper.client import Client

    with (
        tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp,
        database(backend, Path(tmp)) as url,
        serve(url, Path(tmp)) as server,
    ):
        store = Store(url, migrate=False)
        queue = QueueService(store, settings_for(Path(tmp), url))
        _fill(queue, args.tasks)
        store.close()
        _analyze(url)
        with Client(server.base_url, server.token) as client:
            ids = [str(client.runners.register("cpu", capacity=batch, host="bench",
                                               pid=os.getpid())["id"])
                   for _ in range(args.runners)]  # fmt: skip
        go = FORK.Event()
        procs = [FORK.Process(target=_http_drain, args=(server.base_url, server.token, rid,
                                                        batch, go))
                 for rid in ids]  # fmt: skip
        for proc in procs:
            proc.start()
        time.sleep(0.5)
        meter = _Meter(backend, server_pid=server.pid)
        started = time.time()
        go.set()
        for proc in procs:
            proc.join()
        cpu, pg = meter.spent()
        server_cpu = meter.server_spent()
        if any(proc.exitcode != 0 for proc in procs):
            raise RuntimeError(f"an HTTP runner failed; the server's log: {server.log}")
        last = _last_at(url, LAST_OURS)
    return Drained(args.tasks, last - started, cpu, pg, server_cpu)


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


#: pgqueuer deletes a finished job and logs it; the log's last success is its last completion.
LAST_PGQUEUER = (
    "SELECT EXTRACT(EPOCH FROM MAX(created)) FROM pgqueuer_log WHERE status = 'successful'"
)


def burn_pgqueuer(args: argparse.Namespace) -> Drained:
    """pgqueuer draining the same number of no-op jobs with as many processes."""
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
        _analyze(url)
        return _time_workers(
            args, url, LAST_PGQUEUER, lambda go: (_pgqueuer_worker, (url, args.batch, go))
        )


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


LAST_PROCRASTINATE = (
    "SELECT EXTRACT(EPOCH FROM MAX(at)) FROM procrastinate_events WHERE type = 'succeeded'"
)


def burn_procrastinate(args: argparse.Namespace) -> Drained:
    """procrastinate draining the same number of no-op jobs with as many processes."""
    with tempfile.TemporaryDirectory() as tmp, database("postgresql", Path(tmp)) as url:
        app = _procrastinate_app(url)
        with app.open():
            app.schema_manager.apply_schema()
            task = app.tasks["noop"]
            for start in range(0, args.tasks, 5000):
                task.batch_defer(*[{}] * min(5000, args.tasks - start))
        _analyze(url)
        return _time_workers(
            args, url, LAST_PROCRASTINATE, lambda go: (_procrastinate_worker, (url, go))
        )


def _time_workers(
    args: argparse.Namespace,
    url: str,
    last_sql: str,
    target: Callable[[Any], tuple[Any, tuple[Any, ...]]],
) -> Drained:
    go = FORK.Event()
    procs = []
    for _ in range(args.runners):
        function, arguments = target(go)
        procs.append(FORK.Process(target=function, args=arguments))
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # every worker connected and registered its task
    meter = _Meter("postgresql")
    started = time.time()
    go.set()
    for proc in procs:
        proc.join()
    # Taken after the workers exit: their idle tail costs little CPU but is not hidden.
    cpu, pg = meter.spent()
    if any(proc.exitcode != 0 for proc in procs):
        raise RuntimeError("a worker failed")
    return Drained(args.tasks, _last_at(url, last_sql) - started, cpu, pg)


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
        from watchkeeper.store.schema.queue import queue_tasks

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
    parser.add_argument("--rounds", type=int, default=3, help="interleaved burn-down rounds")
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--blocked", type=int, default=10_000)
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--no-peers", action="store_true", help="skip pgqueuer and procrastinate")
    parser.add_argument("--no-http", action="store_true", help="skip the runs through the server")
    parser.add_argument("--batch1", action="store_true", help="also burn down leasing 1 at a time")
    parser.add_argument("--only-burn", action="store_true", help="burn-down figures only")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    backends = ("sqlite", "postgresql") if args.db == "both" else (args.db,)
    results: dict[str, Any] = {}
    for backend in backends:
        figures: dict[str, Any] = {"burn": burn_rounds(backend, args)}
        figures["burn_tasks_per_s"] = figures["burn"]["systems"][IN_PROCESS]["rate"]["median"]
        if not args.only_burn:
            figures["latency"] = latency(backend, args)
            kills = relapse(backend, args.kills)
            figures["sigkill_to_relase_s"] = {"median": statistics.median(kills),
                                              "max": max(kills)}  # fmt: skip
            figures["blocked"] = blocked(backend, args.blocked)
        results[backend] = figures
        _show(backend, args, figures)
    payload = {"benchmark": "queue", "command": command_line(),
               "machine": machine(PG_ADMIN_URL), "results": results}  # fmt: skip
    write_json(args.json, payload)
    print(f"\ncommand: {payload['command']}")


IN_PROCESS = "watchkeeper in-process"
OVER_HTTP = "watchkeeper over HTTP"
PEERS = ("pgqueuer", "procrastinate")


def _systems(backend: str, args: argparse.Namespace) -> dict[str, Callable[[], Drained]]:
    systems: dict[str, Callable[[], Drained]] = {
        IN_PROCESS: lambda: burn_ours(backend, args, args.batch)
    }
    if args.batch1:
        systems[f"{IN_PROCESS}, batch 1"] = lambda: burn_ours(backend, args, 1)
    if not args.no_http:
        systems[OVER_HTTP] = lambda: burn_ours_http(backend, args, args.batch)
    if backend == "postgresql" and not args.no_peers:
        systems["pgqueuer"] = lambda: burn_pgqueuer(args)
        systems["procrastinate"] = lambda: burn_procrastinate(args)
    return systems


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def burn_rounds(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every system drains once per round, in turn, so a slow spell of the machine falls on
    all of them; rates, CPU per task and the per-round ratios of ours to each peer."""
    systems = _systems(backend, args)
    drained: dict[str, list[Drained]] = {name: [] for name in systems}
    failed: dict[str, str] = {}
    for _ in range(args.rounds):
        for name, run in systems.items():
            if name in failed:
                continue
            try:
                drained[name].append(run())
            except Exception as exc:
                if name not in PEERS:
                    raise
                failed[name] = f"could not run: {type(exc).__name__}: {exc}"
    figures: dict[str, Any] = {}
    for name, runs in drained.items():
        if not runs:
            continue
        pg = [x for x in (r.pg_cpu_ms_per_task for r in runs) if x is not None]
        server = [x for x in (r.server_cpu_ms_per_task for r in runs) if x is not None]
        figures[name] = {
            "server_cpu_ms_per_task": _spread(server) if server else None,
            "rate": _spread([r.rate for r in runs]),
            "cpu_ms_per_task": _spread([r.cpu_ms_per_task for r in runs]),
            "pg_cpu_ms_per_task": _spread(pg) if pg else None,
        }
    ratios: dict[str, Any] = {}
    for ours in (IN_PROCESS, OVER_HTTP):
        for peer in PEERS:
            if drained.get(ours) and drained.get(peer):
                pairs = zip(drained[ours], drained[peer], strict=True)
                ratios[f"{ours} / {peer}"] = _spread([a.rate / b.rate for a, b in pairs])
    return {"rounds": args.rounds, "systems": figures, "ratios": ratios, "failed": failed}


def _show(backend: str, args: argparse.Namespace, figures: dict[str, Any]) -> None:
    burn = figures["burn"]
    rows: list[tuple[str, object]] = []
    for name, f in burn["systems"].items():
        rate, cpu, pg = f["rate"], f["cpu_ms_per_task"], f["pg_cpu_ms_per_task"]
        rows.append(
            (
                f"{name}: tasks/s min / median / max",
                f"{rate['min']:,.0f} / {rate['median']:,.0f} / {rate['max']:,.0f}",
            )
        )
        rows.append((f"{name}: CPU ms per task, workers+server (median)", cpu["median"]))
        if f["server_cpu_ms_per_task"] is not None:
            rows.append((f"{name}: of which the server (median)",
                         f["server_cpu_ms_per_task"]["median"]))  # fmt: skip
        if pg is not None:
            rows.append((f"{name}: CPU ms per task, PostgreSQL (median)", pg["median"]))
    for name, spread in burn["ratios"].items():
        rows.append(
            (
                f"rate ratio {name}, min / median / max",
                f"{spread['min']:.2f} / {spread['median']:.2f} / {spread['max']:.2f}",
            )
        )
    for name, why in burn["failed"].items():
        rows.append((name, why))
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
    title = (f"queue on {backend}: {args.tasks:,} no-op tasks, {args.runners} workers, "
             f"batch {args.batch}, {args.rounds} interleaved round(s)")  # fmt: skip
    print_table(title, rows)


if __name__ == "__main__":
    main()
