"""Circuit breaker: per-call overhead, the half-open probe, closed-state concurrency.

The slow-probe test holds the half-open probe in flight past three reset
timeouts while new callers arrive each timeout, and reports the most probes
ever in flight at once (the goal is 1).

Compares watchkeeper's CircuitBreaker with pybreaker in the same run. Run from
the repository root with the bench venv (see bench/requirements-supervise.txt):

    .venv-bench/bin/python bench/breaker.py --calls 200000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pybreaker

from watchkeeper.supervise import CircuitBreaker, CircuitOpenError, ManualClock


def noop() -> int:
    return 1


def per_call_ns(call: Callable[[], object], calls: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter_ns() - start) / calls)
    return best


def overhead(calls: int) -> dict[str, float]:
    wk = CircuitBreaker("bench", fail_max=5, reset_timeout_s=30)
    pb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)
    direct = per_call_ns(noop, calls)
    wk_ns = per_call_ns(lambda: wk.call(noop), calls)
    pb_ns = per_call_ns(lambda: pb.call(noop), calls)

    async def async_loop() -> float:
        async def anoop() -> int:
            return 1

        best = float("inf")
        for _ in range(5):
            start = time.perf_counter_ns()
            for _ in range(calls):
                await wk.call_async(anoop)
            best = min(best, (time.perf_counter_ns() - start) / calls)
        start = time.perf_counter_ns()
        for _ in range(calls):
            await anoop()
        return best - (time.perf_counter_ns() - start) / calls

    return {
        "direct_ns": direct,
        "watchkeeper_ns": wk_ns - direct,
        "pybreaker_ns": pb_ns - direct,
        "watchkeeper_async_ns": asyncio.run(async_loop()),
    }


def watchkeeper_probe(callers: int) -> tuple[int, int]:
    clock = ManualClock()
    breaker = CircuitBreaker("probe", fail_max=1, reset_timeout_s=10, clock=clock)
    with contextlib.suppress(ZeroDivisionError):
        breaker.call(lambda: 1 / 0)
    clock.advance(10)
    entered = 0

    async def run() -> int:
        release = asyncio.Event()

        async def probe() -> None:
            nonlocal entered
            entered += 1
            await release.wait()

        tasks = [asyncio.create_task(breaker.call_async(probe)) for _ in range(callers)]
        await asyncio.sleep(0.01)
        fast = sum(1 for t in tasks if t.done() and isinstance(t.exception(), CircuitOpenError))
        release.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        return fast

    fast = asyncio.run(run())
    return entered, fast


def watchkeeper_slow_probe(callers: int, timeouts: int = 3) -> tuple[int, int]:
    """Most calls in flight at once while one probe outlives ``timeouts`` reset
    timeouts (ManualClock), and the callers refused meanwhile."""
    clock = ManualClock()
    breaker = CircuitBreaker("slow-probe", fail_max=1, reset_timeout_s=10, clock=clock)
    with contextlib.suppress(ZeroDivisionError):
        breaker.call(lambda: 1 / 0)
    clock.advance(10)
    state = {"now": 0, "peak": 0, "refused": 0}

    async def run() -> None:
        release = asyncio.Event()

        async def call() -> None:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            await release.wait()
            state["now"] -= 1

        tasks = [asyncio.create_task(breaker.call_async(call))]
        for _ in range(timeouts):
            await asyncio.sleep(0)
            clock.advance(10)
            tasks += [asyncio.create_task(breaker.call_async(call)) for _ in range(callers)]
        await asyncio.sleep(0.01)
        release.set()
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            state["refused"] += isinstance(result, CircuitOpenError)

    asyncio.run(run())
    return state["peak"], state["refused"]


def pybreaker_slow_probe(callers: int, timeouts: int = 3) -> int:
    """Most calls in flight at once while one probe outlives ``timeouts`` reset
    timeouts (real time: pybreaker reads the system clock)."""
    reset_s = 0.05
    breaker = pybreaker.CircuitBreaker(fail_max=1, reset_timeout=reset_s)
    with contextlib.suppress(ZeroDivisionError, pybreaker.CircuitBreakerError):
        breaker.call(lambda: 1 / 0)
    time.sleep(reset_s * 1.2)
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def call(hold_s: float) -> None:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(hold_s)
        with lock:
            state["now"] -= 1

    def caller(hold_s: float) -> None:
        with contextlib.suppress(pybreaker.CircuitBreakerError):
            breaker.call(call, hold_s)

    with ThreadPoolExecutor(callers + 1) as pool:
        pool.submit(caller, reset_s * (timeouts + 0.5))
        for _ in range(timeouts):
            time.sleep(reset_s)
            for _ in range(callers // timeouts):
                pool.submit(caller, 0.0)
    return state["peak"]


def pybreaker_probe(callers: int) -> tuple[int, int, int]:
    """Probes that ran while half-open, callers failed fast, callers that waited."""
    breaker = pybreaker.CircuitBreaker(fail_max=1, reset_timeout=0.05)
    with contextlib.suppress(ZeroDivisionError, pybreaker.CircuitBreakerError):
        breaker.call(lambda: 1 / 0)
    time.sleep(0.06)
    barrier = threading.Barrier(callers)
    lock = threading.Lock()
    counts = {"probes": 0, "fast": 0, "waited": 0}

    def probe() -> None:
        with lock:
            if breaker.current_state == "half-open":
                counts["probes"] += 1
        time.sleep(0.02)

    def caller() -> None:
        barrier.wait()
        start = time.perf_counter()
        try:
            breaker.call(probe)
        except pybreaker.CircuitBreakerError:
            with lock:
                counts["fast"] += 1
            return
        if time.perf_counter() - start > 0.015:
            with lock:
                counts["waited"] += 1

    with ThreadPoolExecutor(callers) as pool:
        for _ in range(callers):
            pool.submit(caller)
    return counts["probes"], counts["fast"], counts["waited"]


def peak_concurrency(call: Callable[[Callable[[], None]], object], threads: int) -> int:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def work() -> None:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1

    with ThreadPoolExecutor(threads) as pool:
        for _ in range(threads):
            pool.submit(call, work)
    return state["peak"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--callers", type=int, default=100)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()

    o = overhead(args.calls)
    print(f"closed-state overhead per call ({args.calls} calls, best of 5)")
    print(f"  plain call            {o['direct_ns']:8.0f} ns")
    print(f"  watchkeeper (sync)   +{o['watchkeeper_ns']:8.0f} ns")
    print(f"  watchkeeper (async)  +{o['watchkeeper_async_ns']:8.0f} ns")
    print(f"  pybreaker            +{o['pybreaker_ns']:8.0f} ns")
    print(f"  ratio watchkeeper/pybreaker: {o['watchkeeper_ns'] / o['pybreaker_ns']:.2f}")

    entered, fast = watchkeeper_probe(args.callers)
    print(f"half-open with {args.callers} concurrent callers")
    print(f"  watchkeeper: probes through {entered}, failed fast {fast}")
    probes, pfast, waited = pybreaker_probe(args.callers)
    print(
        f"  pybreaker:   probes through {probes}, failed fast {pfast}, waited on its lock {waited}"
    )

    wk_slow, refused = watchkeeper_slow_probe(args.callers)
    pb_slow = pybreaker_slow_probe(args.callers)
    print("probe held past 3 reset timeouts, callers arriving each timeout")
    print(f"  watchkeeper: probes in flight at once {wk_slow}, refused {refused}")
    print(f"  pybreaker:   calls in flight at once {pb_slow}")

    wk = CircuitBreaker("conc")
    pb = pybreaker.CircuitBreaker()
    wk_peak = peak_concurrency(wk.call, args.threads)
    pb_peak = peak_concurrency(pb.call, args.threads)
    print(f"closed-state calls in flight at once ({args.threads} threads, 50 ms calls)")
    print(f"  watchkeeper: {wk_peak}")
    print(f"  pybreaker:   {pb_peak}")


if __name__ == "__main__":
    main()
