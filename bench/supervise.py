"""Restart latency and idle cost: watchkeeper's supervisor, supervisord and circus.

Each supervisor runs in its own process and supervises the same 100 children
(``sleep 3600``), with the shortest restart delay it allows. For each sample
the bench SIGKILLs one child and measures the time until a new child process
of the supervisor runs ``sleep`` (read from /proc every 0.2 ms). Then it
measures the supervising process's CPU time and wake-ups (voluntary context
switches, all threads) while idle.

Run from the repository root with the bench venv (see
bench/requirements-supervise.txt):

    .venv-bench/bin/python bench/supervise.py --samples 40 --idle-seconds 60
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import psutil

CHILD = ["sleep", "3600"]
# circus respawns from a periodic check; 1 s is its arbiter's default (its ini default is 5 s).
CIRCUS_CHECK_DELAY = 1.0

WATCHKEEPER_TREE = textwrap.dedent(
    """
    import asyncio, signal, sys
    from watchkeeper.supervise import Backoff, SupervisorBuilder, process_child

    async def main(count):
        builder = (SupervisorBuilder("bench").backoff(Backoff.none())
                   .intensity(max_restarts=100_000, period_s=1.0))
        for i in range(count):
            builder.child(process_child(f"c{i}", ["sleep", "3600"], shutdown_timeout_s=2))
        handle = await builder.build().start()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print("READY", flush=True)
        await stop.wait()
        await handle.stop()

    asyncio.run(main(int(sys.argv[1])))
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bin_of(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise SystemExit(
            f"{name} not found: create the bench venv (bench/requirements-supervise.txt)"
        )
    return found


def start_watchkeeper(folder: Path, count: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WATCHKEEPER_TREE, str(count)], cwd=folder)


def start_supervisord(folder: Path, count: int) -> subprocess.Popen[bytes]:
    conf = folder / "supervisord.conf"
    conf.write_text(
        textwrap.dedent(
            f"""
            [supervisord]
            nodaemon=true
            logfile={folder}/supervisord.log
            pidfile={folder}/supervisord.pid
            childlogdir={folder}
            [program:sleep]
            command={" ".join(CHILD)}
            numprocs={count}
            process_name=%(program_name)s_%(process_num)03d
            autorestart=true
            startsecs=0
            startretries=1000
            stdout_logfile=/dev/null
            stderr_logfile=/dev/null
            """
        )
    )
    return subprocess.Popen(
        [bin_of("supervisord"), "-c", str(conf)],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start_circus(folder: Path, count: int) -> subprocess.Popen[bytes]:
    conf = folder / "circus.ini"
    conf.write_text(
        textwrap.dedent(
            f"""
            [circus]
            endpoint = tcp://127.0.0.1:{free_port()}
            pubsub_endpoint = tcp://127.0.0.1:{free_port()}
            statsd = false
            check_delay = {CIRCUS_CHECK_DELAY}
            [watcher:sleep]
            cmd = {" ".join(CHILD)}
            numprocesses = {count}
            respawn = true
            check_flapping = false
            warmup_delay = 0
            """
        )
    )
    return subprocess.Popen(
        [bin_of("circusd"), str(conf)],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def child_pids(pid: int) -> set[int]:
    """Direct children of ``pid`` from /proc (one read per thread, no full process scan)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with suppress(FileNotFoundError, ProcessLookupError):
            pids.update(int(x) for x in (task / "children").read_text().split())
    return pids


def is_live_child(pid: int) -> bool:
    """True once ``pid`` runs the child program (exec done) and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    state = stat[stat.rindex(")") + 2]
    return comm == CHILD[0] and state not in "ZX"


def live_children(pid: int) -> set[int]:
    return {p for p in child_pids(pid) if is_live_child(p)}


def wait_for_children(pid: int, count: int, timeout_s: float = 60.0) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kids = live_children(pid)
        if len(kids) >= count:
            return kids
        time.sleep(0.05)
    raise SystemExit(f"supervisor {pid} did not start {count} children in {timeout_s} s")


def restart_latencies(pid: int, count: int, samples: int) -> list[float]:
    rng = random.Random(1)  # the same pauses for every peer
    latencies = []
    for _ in range(samples):
        before = wait_for_children(pid, count)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.perf_counter()
        while True:
            if any(is_live_child(p) for p in child_pids(pid) - before):
                latencies.append(time.perf_counter() - killed_at)
                break
            if time.perf_counter() - killed_at > 30:
                raise SystemExit("no restart within 30 s")
            time.sleep(0.0002)
        # A random pause puts each kill at a random phase of any periodic check a peer runs.
        time.sleep(rng.uniform(0.05, 1.1))
    return latencies


def ctx_switches(pid: int) -> int:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with suppress(FileNotFoundError):
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
    return total


def idle_cost(pid: int, seconds: float) -> tuple[float, int]:
    proc = psutil.Process(pid)
    cpu0, wake0, t0 = proc.cpu_times(), ctx_switches(pid), time.monotonic()
    time.sleep(seconds)
    cpu1, wake1, t1 = proc.cpu_times(), ctx_switches(pid), time.monotonic()
    used = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return 100.0 * used / (t1 - t0), wake1 - wake0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def stop(proc: subprocess.Popen[bytes], pid: int) -> None:
    kids = [psutil.Process(p) for p in live_children(pid)]
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for kid in kids:
        with suppress(psutil.NoSuchProcess):
            kid.kill()


def run_one(
    name: str, start: Callable[[Path, int], subprocess.Popen[bytes]], args: argparse.Namespace
) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        proc = start(Path(tmp), args.children)
        try:
            wait_for_children(proc.pid, args.children)
            time.sleep(args.settle_seconds)
            cpu, wakeups = idle_cost(proc.pid, args.idle_seconds)
            lat = restart_latencies(proc.pid, args.children, args.samples)
        finally:
            stop(proc, proc.pid)
    return {
        "name": name,
        "p50_ms": 1000 * statistics.median(lat),
        "p95_ms": 1000 * percentile(lat, 95),
        "p99_ms": 1000 * percentile(lat, 99),
        "max_ms": 1000 * max(lat),
        "idle_cpu_pct": cpu,
        "idle_wakeups_per_s": wakeups / args.idle_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--settle-seconds", type=float, default=3.0)
    parser.add_argument("--only", choices=["watchkeeper", "supervisord", "circus"], action="append")
    parser.add_argument("--circus-check-delay", type=float, default=CIRCUS_CHECK_DELAY)
    args = parser.parse_args()
    globals()["CIRCUS_CHECK_DELAY"] = args.circus_check_delay
    peers = {
        "watchkeeper": start_watchkeeper,
        "supervisord": start_supervisord,
        "circus": start_circus,
    }
    print(
        f"{args.children} children, {args.samples} SIGKILL samples, "
        f"idle measured over {args.idle_seconds:g} s"
    )
    print(
        f"{'supervisor':<12} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'idle CPU %':>10} {'wakeups/s':>10}"
    )
    for name in args.only or list(peers):
        r = run_one(name, peers[name], args)
        print(
            f"{r['name']:<12} {r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f} {r['p99_ms']:>8.1f} "
            f"{r['max_ms']:>8.1f} {r['idle_cpu_pct']:>10.3f} {r['idle_wakeups_per_s']:>10.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
