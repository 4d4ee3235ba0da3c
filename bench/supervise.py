"""Restart latency and idle cost: watchkeeper's supervisor, a pidfd floor, supervisord and circus.

Each supervisor runs in its own process and supervises the same 100 children
(``sleep 3600``), with the shortest restart delay it allows. The floor is the
least a supervisor can do in Python: about twenty lines that wait on the
children's pidfds with epoll and start a new child with ``os.posix_spawnp`` at
once (own session, stdin from /dev/null, as watchkeeper's).

First the supervising process's CPU time and wake-ups (voluntary context
switches, all threads) while idle. Then, for each sample, the bench SIGKILLs
one child and measures the time until a new child process of the supervisor
runs ``sleep`` (read from /proc every 0.2 ms); the supervisor's CPU time over
the samples (all its threads, from /proc/PID/task/*/schedstat, in ns) divided
by their number is its CPU per restart. It leaves out the children's own work
before exec, which is theirs. Peers take turns within each round, so every
round sees the machine's load of the moment alike.

Run from the repository root with the bench venv (see
bench/requirements-supervise.txt):

    .venv-bench/bin/python bench/supervise.py --samples 40 --idle-seconds 60
    .venv-bench/bin/python bench/supervise.py --rounds 3 --samples 40 --idle-seconds 10 \
        --only floor --only watchkeeper --only supervisord
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


FLOOR_TREE = textwrap.dedent(
    """
    import os, select, signal, sys

    ARGV = ["sleep", "3600"]
    STDIN = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0)]
    poller, kids = select.epoll(), {}

    def spawn():
        pid = os.posix_spawnp(ARGV[0], ARGV, os.environ, file_actions=STDIN, setsid=True)
        fd = os.pidfd_open(pid)
        poller.register(fd, select.EPOLLIN)
        kids[fd] = pid

    for _ in range(int(sys.argv[1])):
        spawn()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("READY", flush=True)
    while True:
        for fd, _ in poller.poll():
            poller.unregister(fd)
            os.close(fd)
            os.waitpid(kids.pop(fd), 0)
            spawn()
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


def start_watchkeeper_from(src: str) -> Callable[[Path, int], subprocess.Popen[bytes]]:
    """Watchkeeper's supervisor imported from another tree's ``src`` (a "before" to compare)."""

    def start(folder: Path, count: int) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
        return subprocess.Popen(
            [sys.executable, "-c", WATCHKEEPER_TREE, str(count)], cwd=folder, env=env
        )

    return start


def start_floor(folder: Path, count: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", FLOOR_TREE, str(count)], cwd=folder)


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


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of ``pid`` so far, in ns (schedstat, not clock ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with suppress(FileNotFoundError, ProcessLookupError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


def restart_latencies(pid: int, count: int, samples: int) -> tuple[list[float], float]:
    """Restart latencies in seconds, and the supervisor's CPU per restart in seconds."""
    rng = random.Random(1)  # the same pauses for every peer
    latencies = []
    cpu0 = cpu_ns(pid)
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
    return latencies, (cpu_ns(pid) - cpu0) / 1e9 / samples


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
    return 100.0 * used / max(t1 - t0, 1e-9), wake1 - wake0


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
            lat, cpu_per_restart = restart_latencies(proc.pid, args.children, args.samples)
        finally:
            stop(proc, proc.pid)
    return {
        "name": name,
        "min_ms": 1000 * min(lat),
        "p50_ms": 1000 * statistics.median(lat),
        "p95_ms": 1000 * percentile(lat, 95),
        "p99_ms": 1000 * percentile(lat, 99),
        "max_ms": 1000 * max(lat),
        "idle_cpu_pct": cpu,
        "idle_wakeups_per_s": wakeups / args.idle_seconds if args.idle_seconds else 0.0,
        "cpu_us_per_restart": 1e6 * cpu_per_restart,
    }


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--settle-seconds", type=float, default=3.0)
    parser.add_argument(
        "--only",
        choices=["floor", "watchkeeper", "watchkeeper-before", "supervisord", "circus"],
        action="append",
    )
    parser.add_argument("--circus-check-delay", type=float, default=CIRCUS_CHECK_DELAY)
    parser.add_argument(
        "--before-src",
        metavar="DIR",
        help="another tree's src/ to run as peer watchkeeper-before (e.g. from git archive)",
    )
    args = parser.parse_args()
    globals()["CIRCUS_CHECK_DELAY"] = args.circus_check_delay
    peers: dict[str, Callable[[Path, int], subprocess.Popen[bytes]]] = {
        "floor": start_floor,
        "watchkeeper": start_watchkeeper,
    }
    if args.before_src:
        peers["watchkeeper-before"] = start_watchkeeper_from(args.before_src)
    peers["supervisord"] = start_supervisord
    peers["circus"] = start_circus
    # Always in this order, so each round has its floor before the others are set against it.
    names = [n for n in peers if n in args.only] if args.only else list(peers)
    print(
        f"{args.children} children, {args.samples} SIGKILL samples a round, {args.rounds} "
        f"round(s), idle measured over {args.idle_seconds:g} s"
    )
    header = (
        f"{'round':>5} {'supervisor':<18} {'min ms':>7} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'p99 ms':>7} {'max ms':>7} {'CPU us/restart':>14} {'idle CPU %':>10} "
        f"{'wakeups/s':>9} {'x floor p50':>11}  load"
    )
    print(header)
    results: dict[str, list[dict[str, float | str]]] = {n: [] for n in names}
    for rnd in range(1, args.rounds + 1):
        floor_p50: float | None = None
        for name in names:
            before = load()
            r = run_one(name, peers[name], args)
            results[name].append(r)
            p50 = float(r["p50_ms"])
            if name == "floor":
                floor_p50 = p50
            ratio = f"{p50 / floor_p50:.2f}" if floor_p50 else "-"
            r["x_floor"] = p50 / floor_p50 if floor_p50 else float("nan")
            print(
                f"{rnd:>5} {name:<18} {r['min_ms']:>7.2f} {p50:>7.2f} {r['p95_ms']:>7.2f} "
                f"{r['p99_ms']:>7.2f} {r['max_ms']:>7.2f} {r['cpu_us_per_restart']:>14.0f} "
                f"{r['idle_cpu_pct']:>10.3f} {r['idle_wakeups_per_s']:>9.2f} {ratio:>11}  "
                f"{before} -> {load()}",
                flush=True,
            )
    if args.rounds > 1:
        print("\nover the rounds, min / median / max of each round's figure:")
        for name, rows in results.items():

            def spread(key: str, fmt: str, rows: list[dict[str, float | str]] = rows) -> str:
                xs = sorted(float(r[key]) for r in rows)
                return " / ".join(format(x, fmt) for x in (xs[0], statistics.median(xs), xs[-1]))

            print(
                f"{name:<18} p50 ms {spread('p50_ms', '.2f')}; p95 ms {spread('p95_ms', '.2f')}; "
                f"CPU us/restart {spread('cpu_us_per_restart', '.0f')}"
                + (f"; x floor p50 {spread('x_floor', '.2f')}" if "floor" in results else "")
            )


if __name__ == "__main__":
    main()
