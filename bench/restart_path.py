"""Where one restart's time goes inside watchkeeper's supervisor, from exit seen to child running.

The supervisor runs in this process with 100 children (``sleep 3600``) and
``Backoff.none()``; a thread SIGKILLs one child at a time and waits for its
replacement, pausing between kills so each restart starts from an idle
process, as in bench/supervise.py. Three stretches are timed in the loop
thread: from the child's pidfd being handled to the libc spawn being called
(the supervisor's own Python: exit, mailbox, policy, a new runner, the
environment), the spawn itself (vfork and exec of ``sleep``), and the rest of
the launch (pidfd, reader, timers). With ``--profile`` it prints a cProfile
of the loop thread instead.

    .venv/bin/python bench/restart_path.py --restarts 60 --pause 0.2
    .venv/bin/python bench/restart_path.py --restarts 300 --pause 0.02 --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import signal
import statistics
import threading
import time
from typing import Any

from watchkeeper.supervise import Backoff, SupervisorBuilder, SupervisorHandle, process_child, spawn
from watchkeeper.supervise import process as proc

MARKS: dict[str, list[float]] = {"exit": [], "call": [], "return": [], "launched": []}


def instrument() -> None:
    real_exit, real_run = proc.ProcessRunner._on_exit, spawn._Libc.run
    real_launch = proc.ProcessRunner.launch

    def on_exit(self: Any) -> None:
        MARKS["exit"].append(time.perf_counter())
        real_exit(self)

    def run(self: Any, *args: Any, **kw: Any) -> int:
        MARKS["call"].append(time.perf_counter())
        try:
            return real_run(self, *args, **kw)
        finally:
            MARKS["return"].append(time.perf_counter())

    def launch(self: Any) -> None:
        real_launch(self)
        MARKS["launched"].append(time.perf_counter())

    proc.ProcessRunner._on_exit = on_exit  # type: ignore[method-assign]
    spawn._Libc.run = run  # type: ignore[method-assign]
    proc.ProcessRunner.launch = launch  # type: ignore[method-assign]


def kill_one_by_one(handle: SupervisorHandle, restarts: int, pause: float) -> None:
    for i in range(restarts):
        slot = i % 100
        pid = handle.children()[slot].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        while handle.children()[slot].pid in (pid, None):
            time.sleep(0.0005)
        time.sleep(pause)


def spread(values: list[float]) -> str:
    return f"{min(values):.0f} / {statistics.median(values):.0f} / {max(values):.0f}"


async def main(args: argparse.Namespace) -> None:
    builder = (
        SupervisorBuilder("bench")
        .backoff(Backoff.none())
        .intensity(max_restarts=100_000, period_s=1.0)
    )
    for i in range(100):
        builder.child(process_child(f"c{i}", ["sleep", "3600"], shutdown_timeout_s=2))
    handle = await builder.build().start()
    for marks in MARKS.values():
        marks.clear()
    profile = cProfile.Profile() if args.profile else None
    if profile is not None:
        profile.enable()
    killer = threading.Thread(target=kill_one_by_one, args=(handle, args.restarts, args.pause))
    killer.start()
    await asyncio.get_running_loop().run_in_executor(None, killer.join)
    if profile is not None:
        profile.disable()
    await handle.stop()
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return
    n = min(len(m) for m in MARKS.values())
    us = [
        [1e6 * (b - a) for a, b in zip(MARKS[x][:n], MARKS[y][:n], strict=True)]
        for x, y in (("exit", "call"), ("call", "return"), ("return", "launched"))
    ]
    print(f"{n} restarts, {args.pause:g} s apart; microseconds, min / median / max")
    print(f"exit handled -> spawn called   {spread(us[0])}")
    print(f"spawn (vfork, exec of sleep)   {spread(us[1])}")
    print(f"rest of the launch             {spread(us[2])}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=60)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--profile", action="store_true")
    ns = parser.parse_args()
    if not ns.profile:
        instrument()
    asyncio.run(main(ns))
