"""One read of 10,000 active Celery tasks and of 10,000 started RQ jobs, and what it costs Redis.

What it measures, each engine on a redis-server of the benchmark's own (a free port, a
temporary folder; never another Redis):

Each read is also timed in CPU seconds of this process, which other work on the machine
changes less than the wall clock.

- Celery: 10,000 tasks active on real Celery workers: four workers of the thread pool
  (subprocesses, 3,750 threads each) run the tasks, one per thread, which says its
  progress with ``update_state`` and then sleeps, so ``inspect active`` lists all 10,000
  and the result backend holds each one's ``PROGRESS`` meta. Two prefork workers beside
  them run the ping tasks below. The adapter's read is timed after a first read has learnt
  the workers (a read then returns as soon as every known worker answered, instead of
  waiting the whole inspect timeout).
- RQ: 10,000 jobs made with RQ's own API and started as a worker starts them
  (``job.prepare_for_execution`` and ``Execution.create``: status, started registry,
  executions), held by a registered worker record (``Worker.register_birth``) whose pid is
  this process, so the owner is alive.

For each: the median of ``--reads`` reads (``adapter.read`` then ``judge`` of every run: what a
sweep does with an engine kind), and the Redis commands one read sends, from
``INFO commandstats`` before and after it, by command, less the commands the engine's own
idle workers sent in a window of the same length just before (Celery's workers poll the
broker). No ``KEYS`` and no script: keys are found with ``SCAN`` and read in pipelined
batches of 1,000, so no single command holds Redis long (``usec_per_call`` is shown).

Reading never blocks the engine's workers, measured: while the 10,000 are there, a real
worker of each engine runs a stream of trivial tasks (Celery: a ``ping`` task on the
prefork workers, the result read back; RQ: a ``noop`` job on a real ``rq worker``, its
result waited for), one at a time, and each round trip is timed, first with no read going
on and then with the adapter reading back to back in another thread, interleaved for
``--rounds`` rounds. Blocking would show as round trips that wait for a read (a read is
hundreds of milliseconds); the p50 and p99 of each side are printed.

Run::

    .venv/bin/python bench/engines.py                 # both engines
    .venv/bin/python bench/engines.py --json engines.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from _common import free_port, percentile
from watchkeeper import config
from watchkeeper.config import KindConfig
from watchkeeper.judge import judge
from watchkeeper.kinds.base import Adapter, AdapterContext
from watchkeeper.kinds.engines.celery import CeleryAdapter
from watchkeeper.kinds.engines.rq import RqAdapter

TASKS = 10_000
CELERY_APP = """
import os
import time
from celery import Celery
app = Celery("bench", broker=os.environ["BENCH_REDIS"], backend=os.environ["BENCH_REDIS"])
app.conf.task_track_started = True
app.conf.result_extended = True
app.conf.worker_prefetch_multiplier = 1

@app.task(name="bench.ping")
def ping():
    return 1

@app.task(name="bench.hold", bind=True)
def hold(self, number, of):
    # Active on its worker, with progress as update_state reports it, until the bench ends.
    self.update_state(state="PROGRESS", meta={"done": number, "of": of})
    time.sleep(3600)
"""
#: Workers of the thread pool holding the active tasks, and each one's threads.
HOLDERS = 4
RQ_TASKS = """
def noop():
    return 1
"""
#: Round trips timed on each side (no read, reads back to back) of each round; beside the
#: reads, they go on until the reading process has made READS_BESIDE reads.
PINGS = 60
READS_BESIDE = 5


def wait(predicate: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    port = free_port()
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(folder),
            "--save",
            "",
            "--appendonly",
            "no",
            # Each thread of a Celery worker's thread pool has its own result backend client.
            "--maxclients",
            str(TASKS + 2_000),
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait(lambda: _pings(url), "redis-server up")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _pings(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url).ping())
    except redis.RedisError:
        return False


def commandstats(conn: redis.Redis) -> dict[str, tuple[int, float]]:
    stats = conn.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), float(v["usec_per_call"]))
        for name, v in stats.items()
    }


def delta(
    before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]
) -> dict[str, int]:
    return {
        name: calls - before.get(name, (0, 0.0))[0]
        for name, (calls, _) in after.items()
        if calls - before.get(name, (0, 0.0))[0]
    }


def measure(adapter: Adapter, conn: redis.Redis, reads: int) -> dict[str, Any]:
    adapter.read(datetime.now(UTC))  # learns the workers; not timed
    times = []
    cpu = []
    runs = 0
    for _ in range(reads):
        started, started_cpu = time.perf_counter(), time.process_time()
        now = datetime.now(UTC)
        views = adapter.read(now)
        for view in views:
            judge(view, adapter.spec, now)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        runs = len(views)
    read_s = statistics.median(times)
    # The engine's own idle traffic in a window as long as one read, then one read's.
    idle_before = commandstats(conn)
    time.sleep(read_s)
    idle = delta(idle_before, commandstats(conn))
    before = commandstats(conn)
    adapter.read(datetime.now(UTC))
    after = commandstats(conn)
    ours = delta(before, after)
    net = {name: ours.get(name, 0) - idle.get(name, 0) for name in ours}
    net.pop("info", None)
    return {
        "runs": runs,
        "read_s": {"median": read_s, "min": min(times), "max": max(times)},
        "cpu_s": statistics.median(cpu),
        "load_average": os.getloadavg()[0],
        "commands": {name: calls for name, calls in sorted(net.items()) if calls > 0},
        "commands_total": sum(calls for calls in net.values() if calls > 0),
        "idle_commands_in_same_window": sum(idle.values()),
        "usec_per_call": {n: after[n][1] for n in sorted(net) if net[n] > 0 and n in after},
        "keys_or_scripts": sum(ours.get(n, 0) for n in ("keys", "eval", "evalsha", "fcall")),
    }


def _read_until_stopped(engine: str, url: str, stop: Any, reads: Any) -> None:
    adapter = adapter_for(ADAPTERS[engine], engine, url)
    try:
        while not stop.is_set():
            adapter.read(datetime.now(UTC))
            with reads.get_lock():
                reads.value += 1
    finally:
        adapter.close()


def workers_beside_reads(
    engine: str, url: str, round_trip: Callable[[], None], rounds: int
) -> dict[str, Any]:
    """Round trips of a trivial task through the engine's own workers, with no read going
    on and with an adapter reading back to back, interleaved ``rounds`` times.

    The reads run in a process of their own (spawned: this one holds an engine client's
    threads), as a sweep runs in the server's: in this one they would hold the
    interpreter's lock and slow the round trips' own client, not the workers."""
    quiet: list[float] = []
    beside: list[float] = []
    spawn = multiprocessing.get_context("spawn")
    reads = spawn.Value("i", 0)

    def timed(into: list[float], until_reads: int = 0) -> None:
        done = 0
        while done < PINGS or reads.value < until_reads:
            started = time.perf_counter()
            round_trip()
            into.append(time.perf_counter() - started)
            done += 1

    round_trip()  # the first carries the workers' own warm-up
    for _ in range(rounds):
        timed(quiet)
        stop = spawn.Event()
        reader = spawn.Process(
            target=_read_until_stopped, args=(engine, url, stop, reads), daemon=True
        )
        before = reads.value
        reader.start()
        wait(
            lambda r=reader, b=before: reads.value > b or not r.is_alive(),
            "a first read beside the workers",
        )
        timed(beside, until_reads=before + READS_BESIDE)
        stop.set()
        reader.join(timeout=60)
    return {
        "round_trips": {"no_read": len(quiet), "reading": len(beside)},
        "reads_beside": reads.value,
        "no_read_ms": {
            "p50": percentile(quiet, 50) * 1000,
            "p99": percentile(quiet, 99) * 1000,
            "max": max(quiet) * 1000,
        },
        "reading_ms": {
            "p50": percentile(beside, 50) * 1000,
            "p99": percentile(beside, 99) * 1000,
            "max": max(beside) * 1000,
        },
    }


ADAPTERS: dict[str, type[Adapter]] = {"celery": CeleryAdapter, "rq": RqAdapter}


def adapter_for(cls: type[Adapter], engine: str, url: str) -> Adapter:
    table = {"engine": engine, "url": url, "budget_s": 300}
    settings = config.parse({"kinds": {"jobs": table}}, "bench")
    return cls("jobs", KindConfig(**table), AdapterContext(settings, None))


def _celery_worker(folder: Path, env: dict[str, str], name: str, *options: str) -> Any:
    argv = [sys.executable, "-m", "celery", "-A", "benchapp", "worker", "-n", name, *options]
    quiet = ["-l", "warning", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    return subprocess.Popen(
        [*argv, *quiet],
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _meta_keys(conn: redis.Redis) -> int:
    return sum(1 for _ in conn.scan_iter(match="celery-task-meta-*", count=1000))


def bench_celery(url: str, folder: Path, reads: int, rounds: int) -> dict[str, Any]:
    from celery import Celery

    (folder / "benchapp.py").write_text(CELERY_APP)
    env = {**os.environ, "BENCH_REDIS": url, "PYTHONPATH": str(folder)}
    # Room beyond an even share: the broker hands tasks out unevenly, and a task a worker
    # has no thread for waits reserved instead of running.
    per_holder = str(TASKS * 3 // (2 * HOLDERS))
    holders = [
        _celery_worker(folder, env, f"h{n}@bench", "-P", "threads", "-c", per_holder, "-Q", "hold")
        for n in range(1, HOLDERS + 1)
    ]
    pingers = [
        _celery_worker(folder, env, f"w{n}@bench", "-P", "prefork", "-c", "1", "-Q", "celery")
        for n in (1, 2)
    ]
    app = Celery("bench-writer", broker=url, backend=url)
    conn = redis.Redis.from_url(url)
    try:
        wanted = HOLDERS + 2
        wait(
            lambda: len(app.control.inspect(timeout=0.5).ping() or {}) == wanted,
            "Celery workers up",
        )
        for number in range(TASKS):
            app.send_task("bench.hold", args=(number, TASKS), queue="hold")
        # Every task started on a thread of a holder and said its progress.
        wait(lambda: _meta_keys(conn) >= TASKS, f"{TASKS:,} tasks active", timeout=600)
        active = app.control.inspect(timeout=5).active() or {}
        on_workers = sum(len(tasks) for tasks in active.values())
        if on_workers < TASKS:
            raise SystemExit(f"only {on_workers:,} of {TASKS:,} tasks are active on workers")
        adapter = adapter_for(CeleryAdapter, "celery", url)
        try:
            figures = measure(adapter, conn, reads)
            figures["active_on_workers"] = on_workers

            def ping() -> None:
                app.send_task("bench.ping").get(timeout=30)

            figures["workers"] = workers_beside_reads("celery", url, ping, rounds)
            return figures
        finally:
            adapter.close()
    finally:
        app.close()
        # The holders' tasks sleep for an hour: a warm shutdown would wait for them.
        for process in holders:
            process.kill()
        for process in pingers:
            process.terminate()
        for process in [*holders, *pingers]:
            process.wait(timeout=30)


def bench_rq(url: str, folder: Path, reads: int, rounds: int) -> dict[str, Any]:
    from rq import Queue, Worker
    from rq.executions import Execution

    (folder / "benchtasks.py").write_text(RQ_TASKS)
    conn = redis.Redis.from_url(url)
    queue = Queue("bench", connection=conn)
    worker = Worker([queue], connection=conn, name="bench-worker")
    worker.register_birth()
    jobs = queue.enqueue_many(
        [Queue.prepare_data("bench.work", (number,)) for number in range(TASKS)]
    )
    for start in range(0, TASKS, 1000):
        with conn.pipeline() as pipe:
            for job in jobs[start : start + 1000]:
                job.prepare_for_execution(worker.name, pipe)
                Execution.create(job, ttl=3600, pipeline=pipe, worker_name=worker.name)
            pipe.execute()
    adapter = adapter_for(RqAdapter, "rq", url)
    pings = Queue("pings", connection=conn)
    env = {**os.environ, "PYTHONPATH": str(folder)}
    real_worker = subprocess.Popen(
        [str(Path(sys.executable).parent / "rq"), "worker", "--url", url, "-n", "pinger", "pings"],
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        figures = measure(adapter, conn, reads)

        def ping() -> None:
            job = pings.enqueue("benchtasks.noop")
            result = job.latest_result(timeout=30)
            if result is None or not result.type == result.Type.SUCCESSFUL:
                raise SystemExit(f"the RQ worker did not run a ping: {result}")

        figures["workers"] = workers_beside_reads("rq", url, ping, rounds)
        return figures
    finally:
        real_worker.terminate()
        real_worker.wait(timeout=30)
        adapter.close()
        worker.register_death()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=5, help="timed reads per engine")
    parser.add_argument("--engine", choices=["celery", "rq", "both"], default="both")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of worker round trips, without and with reads"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    results: dict[str, Any] = {"tasks": TASKS}
    for engine in ("celery", "rq"):
        if args.engine not in (engine, "both"):
            continue
        with tempfile.TemporaryDirectory() as folder, redis_server(Path(folder)) as url:
            if engine == "celery":
                results[engine] = bench_celery(url, Path(folder), args.reads, args.rounds)
            else:
                results[engine] = bench_rq(url, Path(folder), args.reads, args.rounds)
        figures = results[engine]
        print(
            f"{engine}: {figures['runs']:,} runs, one read {figures['read_s']['median']:.3f} s "
            f"(min {figures['read_s']['min']:.3f}, max {figures['read_s']['max']:.3f}; "
            f"{figures['cpu_s']:.3f} s CPU; load average {figures['load_average']:.1f}); "
            f"{figures['commands_total']} Redis commands {figures['commands']}; "
            f"KEYS or scripts: {figures['keys_or_scripts']}"
        )
        trips = figures["workers"]
        quiet, reading = trips["no_read_ms"], trips["reading_ms"]
        print(
            f"  {engine} workers: {trips['round_trips']['no_read']} round trips with no read, "
            f"p50 {quiet['p50']:.1f} ms p99 {quiet['p99']:.1f} max {quiet['max']:.1f}; "
            f"{trips['round_trips']['reading']} beside {trips['reads_beside']} reads, "
            f"p50 {reading['p50']:.1f} ms "
            f"p99 {reading['p99']:.1f} max {reading['max']:.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
