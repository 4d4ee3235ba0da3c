"""Programs from the configuration: `watchkeeper serve` beside supervisord, 100 programs each.

Each supervisor runs in its own process tree and keeps the same 100 programs
(``sleep 3600``) running, with the shortest restart delay it allows and no start
time (supervisord ``startsecs=0``, watchkeeper ``start_s = 0``). Peers, all started
at once and measured in the same run:

- ``supervisord``: ``[program:sleep]`` with ``numprocs = 100``, ``autorestart = true``;
- ``wk tree``: ``watchkeeper serve`` with 100 ``[programs.NAME]`` under their keepers
  (``contain = "tree"``, the default: the containment ``run`` has);
- ``wk group``: the same with ``contain = "group"`` (the process group only, no keeper);
- ``wk none``: ``watchkeeper serve`` with no program, what the server costs by itself.

Restart latency: a sample SIGKILLs one ``sleep`` of a peer and times until a new
``sleep`` runs under that peer (read from /proc every 0.2 ms); samples go round the
peers in turn, each round in another order, with a random pause after each (so a kill
lands at a random phase of any periodic loop). Idle cost: CPU time and voluntary
wake-ups of every process of the peer but the programs (supervisord; serve and its
keepers), measured over the same windows for all peers, ``--rounds`` windows; memory
is the USS of those processes, summed.

Run from the repository root, with supervisord installed in a scratch venv:

    python3 -m venv /tmp/sv && /tmp/sv/bin/pip install supervisor psutil
    .venv/bin/python bench/programs.py --supervisord /tmp/sv/bin/supervisord \\
        --samples 30 --rounds 5 --idle-seconds 20
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
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import psutil

CHILD = ("sleep", "3600")


@dataclass
class Peer:
    """One supervisor under test and what was measured of it."""

    name: str
    proc: subprocess.Popen[bytes]
    programs: int
    latencies: list[float] = field(default_factory=list)
    idle_cpu: list[float] = field(default_factory=list)
    wakeups: list[float] = field(default_factory=list)
    uss_mib: float = 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def watchkeeper(folder: Path, count: int, contain: str) -> subprocess.Popen[bytes]:
    lines = [f'data_dir = "{folder / "data"}"', "[server]", f"port = {free_port()}"]
    for i in range(count):
        lines += [
            f"[programs.p{i:03d}]",
            f"command = {list(CHILD)!r}".replace("'", '"'),
            "start_s = 0",
            f'contain = "{contain}"',
            "intensity = { restarts = 10000, within_s = 1 }",
            "backoff = { initial_s = 0, jitter = 0 }",
        ]
    config = folder / "watchkeeper.toml"
    config.write_text("\n".join(lines) + "\n")
    wk = Path(sys.executable).with_name("watchkeeper")
    return subprocess.Popen([str(wk), "--config", str(config), "serve"], cwd=folder,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def supervisord(folder: Path, count: int, binary: str) -> subprocess.Popen[bytes]:
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
            startretries=100000
            stdout_logfile=/dev/null
            stderr_logfile=/dev/null
            """
        )
    )
    return subprocess.Popen([binary, "-c", str(conf)], cwd=folder,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with suppress(FileNotFoundError, ProcessLookupError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with suppress(FileNotFoundError, ProcessLookupError):
                found += [int(x) for x in (task / "children").read_text().split()]
    return found


def _stat(pid: int) -> tuple[str, str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return raw[raw.index("(") + 1 : raw.rindex(")")], raw[raw.rindex(")") + 2]


def tree(pid: int) -> tuple[set[int], set[int]]:
    """The live ``sleep`` programs under ``pid``, and every other process of the peer."""
    programs, others, todo = set(), {pid}, _children(pid)
    while todo:
        child = todo.pop()
        stat = _stat(child)
        if stat is None or stat[1] in "ZX":
            continue
        if stat[0] == CHILD[0]:
            programs.add(child)
        else:
            others.add(child)
            todo += _children(child)
    return programs, others


def wait_programs(peer: Peer, timeout_s: float = 600.0) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if peer.proc.poll() is not None:
            raise SystemExit(f"{peer.name} exited with status {peer.proc.returncode}")
        programs, _ = tree(peer.proc.pid)
        if len(programs) >= peer.programs:
            return programs
        time.sleep(0.05)
    raise SystemExit(f"{peer.name} did not start {peer.programs} programs in {timeout_s:g} s")


def restart_latency(peer: Peer) -> float:
    before = wait_programs(peer)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    killed = time.perf_counter()
    while True:
        programs, _ = tree(peer.proc.pid)
        if programs - before:
            return time.perf_counter() - killed
        if time.perf_counter() - killed > 60:
            raise SystemExit(f"{peer.name}: no restart within 60 s")
        time.sleep(0.0002)


def _cost(pids: set[int]) -> tuple[float, int]:
    cpu, wakeups = 0.0, 0
    for pid in pids:
        with suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            cpu += times.user + times.system
        with suppress(FileNotFoundError, ProcessLookupError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with suppress(FileNotFoundError, ProcessLookupError):
                    for line in (task / "status").read_text().splitlines():
                        if line.startswith("voluntary_ctxt_switches"):
                            wakeups += int(line.split()[1])
    return cpu, wakeups


def idle_window(peers: list[Peer], seconds: float) -> None:
    """One idle window measured for every peer over the same seconds."""
    helpers = {p.name: tree(p.proc.pid)[1] for p in peers}
    before = {p.name: _cost(helpers[p.name]) for p in peers}
    started = time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - started
    for peer in peers:
        cpu, wakeups = _cost(helpers[peer.name])
        peer.idle_cpu.append(100.0 * (cpu - before[peer.name][0]) / took)
        peer.wakeups.append((wakeups - before[peer.name][1]) / took)


def memory(peer: Peer) -> float:
    total = 0
    for pid in tree(peer.proc.pid)[1]:
        with suppress(psutil.Error):
            total += psutil.Process(pid).memory_full_info().uss
    return total / 2**20


def stop(peer: Peer) -> None:
    programs, _ = tree(peer.proc.pid)
    peer.proc.send_signal(signal.SIGTERM)
    try:
        peer.proc.wait(60)
    except subprocess.TimeoutExpired:
        peer.proc.kill()
        peer.proc.wait()
    for pid in programs:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def note(text: str) -> None:
    """Where the bench is, on stderr."""
    print(text, file=sys.stderr, flush=True)


def spread(values: list[float], scale: float = 1.0) -> str:
    if not values:
        return "-"
    return (f"{statistics.median(values) * scale:8.2f} {min(values) * scale:8.2f} "
            f"{max(values) * scale:8.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--samples", type=int, default=30, help="SIGKILLs per peer")
    parser.add_argument("--rounds", type=int, default=5, help="idle windows")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--settle-seconds", type=float, default=15.0)
    parser.add_argument("--supervisord", default=shutil.which("supervisord"))
    args = parser.parse_args()
    if not args.supervisord:
        raise SystemExit("supervisord not found: pass --supervisord PATH (see the docstring)")
    with tempfile.TemporaryDirectory(prefix="bench-programs-") as tmp:
        folders = {n: Path(tmp, n.replace(" ", "-")) for n in ("supervisord", "wk tree",
                                                               "wk group", "wk none")}  # fmt: skip
        for folder in folders.values():
            folder.mkdir()
        count = args.programs
        peers = [
            Peer("supervisord", supervisord(folders["supervisord"], count, args.supervisord),
                 count),
            Peer("wk tree", watchkeeper(folders["wk tree"], count, "tree"), count),
            Peer("wk group", watchkeeper(folders["wk group"], count, "group"), count),
            Peer("wk none", watchkeeper(folders["wk none"], 0, "tree"), 0),
        ]  # fmt: skip
        try:
            for peer in peers:
                wait_programs(peer)
                note(f"{peer.name}: {peer.programs} programs running")
            time.sleep(args.settle_seconds)
            for window in range(args.rounds):
                idle_window(peers, args.idle_seconds)
                note(f"idle window {window + 1} of {args.rounds} measured")
            for peer in peers:
                peer.uss_mib = memory(peer)
            rng = random.Random(1)
            restarted = [p for p in peers if p.programs]
            for sample in range(args.samples):
                order = restarted[sample % len(restarted) :] + restarted[: sample % len(restarted)]
                for peer in order:
                    peer.latencies.append(restart_latency(peer))
                    time.sleep(rng.uniform(0.05, 1.1))
                note(f"restart sample {sample + 1} of {args.samples} taken")
        finally:
            for peer in peers:
                stop(peer)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{count} programs, {args.samples} SIGKILLs per peer, {args.rounds} idle windows of "
          f"{args.idle_seconds:g} s; load average {load}")  # fmt: skip
    print(
        f"{'peer':<12} {'restart ms: median':>19} {'min':>8} {'max':>8}   "
        f"{'idle CPU %: median':>18} {'min':>8} {'max':>8}   {'wakeups/s':>9} {'USS MiB':>8}"
    )
    for peer in peers:
        print(f"{peer.name:<12} {spread(peer.latencies, 1000):>37}   {spread(peer.idle_cpu):>36}"
              f"   {statistics.median(peer.wakeups):9.2f} {peer.uss_mib:8.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
