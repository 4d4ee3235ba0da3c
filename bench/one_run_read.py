"""``GET /api/v1/runs/{kind}/{id}`` at 100, 3,100 and 10,000 stored runs, beside its floor.

The floor is the store's own read of that one row (``store.runs.get``), in the same
process, interleaved with the API's read round by round. Both run on a SQLite file in a
temporary folder, through the app in process (no socket: the HTTP stack's cost is the
same at any number of runs). Prints min / median / max over ``--reads`` reads per size,
for a run that exists and one that does not.

Run::

    .venv/bin/python bench/one_run_read.py [--reads 30] [--sizes 100,3100,10000]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from fastapi.testclient import TestClient

from watchkeeper import config
from watchkeeper.clock import utcnow
from watchkeeper.errors import NotFound
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import create_app
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.store.tokens import Role

KIND = "crawl"


def _fill(store: Store, first: int, count: int) -> None:
    now = utcnow()
    for number in range(first, first + count):
        store.runs.start(NewRun(KIND, f"r-{number}", f"crawl {number}", None, "none",
                                None, None, 90), now)  # fmt: skip


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _floor(store: Store, run_id: str) -> None:
    with contextlib.suppress(NotFound):
        store.runs.get(KIND, run_id)


def _row(label: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"{label:<34} {ms[0]:8.2f} {statistics.median(ms):8.2f} {ms[-1]:8.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=30)
    parser.add_argument("--sizes", default="100,3100,10000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        settings = config.parse({"data_dir": folder, "database_url": url}, "bench")
        store = Store(url)
        runtime = Runtime.open(settings, clock=utcnow, store=store,
                               notifier=OpsNotifier(settings.ops))  # fmt: skip
        _, token = store.tokens.create(Role.VIEWER, "bench", utcnow())
        with TestClient(create_app(runtime, run_sweeper=False)) as http:
            http.headers["Authorization"] = f"Bearer {token}"
            held = 0
            print(f"{'':<34} {'min ms':>8} {'median':>8} {'max ms':>8}")
            for size in sizes:
                _fill(store, held, size - held)
                held = size
                api: dict[str, list[float]] = {"r-7": [], "nowhere": []}
                floor: dict[str, list[float]] = {"r-7": [], "nowhere": []}
                for _ in range(args.reads):
                    for run_id in api:
                        path = f"/api/v1/runs/{KIND}/{run_id}"
                        api[run_id].append(_timed(partial(http.get, path)))
                        floor[run_id].append(_timed(partial(_floor, store, run_id)))
                print(f"-- {size:,} runs")
                for run_id, label in (("r-7", "a run"), ("nowhere", "no such run")):
                    print(_row(f"GET one run: {label}", api[run_id]))
                    print(_row(f"store.runs.get: {label}", floor[run_id]))
        runtime.close()


if __name__ == "__main__":
    main()
