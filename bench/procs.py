"""Process runs: ``watchkeeper run -- true`` overhead, ``ps`` cold start, judging 1,000 live runs.

What it measures:

- ``run -- true``: wall time of ``watchkeeper run -- true`` (a foreground run:
  the CLI starts, records the run, starts the shim, the shim starts ``true``,
  writes the witness, the CLI settles the run) against running ``true``
  directly; ``--reps`` repetitions each, interleaved, median and p95. Extra
  time = median(run) - median(true). Goal (issue 5): at most 150 ms.
- ``import`` figures for the same command: the CLI with no command
  (``watchkeeper --help``) and ``python -c 'import watchkeeper.store'``, so the
  cost of the command line and of the store package can be told apart from
  the engine's own.
- ``ps`` cold start: ``watchkeeper ps`` on a store holding one run.
- The supervisor's cost to judge ``--runs`` live process runs: that many
  records, every one owned by the same real live process (so each liveness
  check reads ``/proc`` as it would for a run of its own), each with a log
  file. Timed: the process adapter's read (store + ``/proc`` + log stat +
  witness check) and judging, and the engine's sweep hook (reaping pass).

Run::

    .venv/bin/python bench/procs.py                  # SQLite
    .venv/bin/python bench/procs.py --db both --reps 40 --json procs.json
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _common as common
from watchkeeper.clock import ManualClock
from watchkeeper.procs import identity, layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import NewProc, Started
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

WK = [sys.executable, "-m", "watchkeeper"]


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _stats(prefix: str, values: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_median_ms": statistics.median(values) * 1000,
        f"{prefix}_p95_ms": common.percentile(values, 95) * 1000,
    }


def cli_figures(db_url: str, folder: Path, reps: int) -> common.Figures:
    """Wall times of the command line against running ``true`` directly."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "watchkeeper.toml"
    config.write_text(f'data_dir = "{folder / "data"}"\ndatabase_url = "{db_url}"\n')
    env = {**os.environ, "WATCHKEEPER_CONFIG": str(config)}
    Store(db_url).close()  # migrate once, outside the figures
    _timed([*WK, "run", "--", "true"], env)  # warm the page cache
    direct, run, help_, store_import, ps = [], [], [], [], []
    for _ in range(reps):
        direct.append(_timed(["true"], env))
        run.append(_timed([*WK, "run", "--", "true"], env))
        help_.append(_timed([*WK, "--help"], env))
        store_import.append(_timed([sys.executable, "-c", "import watchkeeper.store"], env))
        ps.append(_timed([*WK, "ps"], env))
    figures: common.Figures = {"reps": reps}
    figures.update(_stats("true", direct))
    figures.update(_stats("run_true", run))
    figures["run_extra_median_ms"] = (statistics.median(run) - statistics.median(direct)) * 1000
    figures.update(_stats("cli_help", help_))
    figures.update(_stats("import_store", store_import))
    figures.update(_stats("ps", ps))
    return figures


def judge_figures(db_url: str, folder: Path, runs: int, sweeps: int) -> common.Figures:
    """The adapter read + judging, and the reaping pass, over ``runs`` live process runs."""
    folder.mkdir(parents=True, exist_ok=True)
    owner = subprocess.Popen(["sleep", "3600"])
    clock = ManualClock(datetime.now(UTC))
    settings = common.settings_for(folder, db_url)
    store = Store(db_url)
    try:
        start = identity.start_time(owner.pid) or ""
        engine = ProcEngine(store, settings.data_dir, clock=clock)
        for index in range(runs):
            run_id = f"p-bench{index:07d}"
            new = NewProc(
                run_id, f"bench {index}", ("sleep", "3600"), "/", identity.host(), "bench",
                identity.boot_id(), True, budget_s=600,
            )  # fmt: skip
            engine.procs.register(new, clock())
            engine.procs.mark_started(
                run_id, Started(owner.pid, start, owner.pid, start, owner.pid), clock()
            )
            path = layout.log_path(settings.data_dir, run_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("line\n")
        runtime = Runtime.open(settings, clock=clock, store=store)
        adapter = runtime.sweeper.adapters["process"]
        reads, hooks, whole = [], [], []
        for _ in range(sweeps):
            started = time.perf_counter()
            views = adapter.read(clock())
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            engine.sweep(clock())
            hooks.append(time.perf_counter() - started)
            started = time.perf_counter()
            asyncio.run(runtime.sweeper.sweep())
            whole.append(time.perf_counter() - started)
            clock.advance(1)
        runtime.sweeper.close()
        assert sum(1 for view in views if view.owner.alive) == runs
    finally:
        store.close()
        owner.kill()
        owner.wait()
    figures: common.Figures = {"live_runs": runs, "sweeps": sweeps}
    figures.update(_stats("adapter_read", reads))
    figures.update(_stats("procs_sweep_hook", hooks))
    figures.update(_stats("supervisor_sweep", whole))
    return figures


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Every figure on one database."""
    with tempfile.TemporaryDirectory(prefix="wk-bench-procs-") as raw:
        folder = Path(raw)
        with common.database(backend, folder) as url:
            figures = cli_figures(url, folder / "cli", args.reps)
        with common.database(backend, folder) as url:
            figures.update(judge_figures(url, folder / "judge", args.runs, args.sweeps))
    return figures


def show(backend: str, figures: dict[str, Any]) -> None:
    """Print one database's figures."""
    common.print_table(f"procs on {backend}", list(figures.items()))


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--reps", type=int, default=30, help="repetitions of each command")
    parser.add_argument("--runs", type=int, default=1000, help="live process runs to judge")
    parser.add_argument("--sweeps", type=int, default=5, help="sweeps to time (median)")
    args = parser.parse_args()
    common.run_backends(args, "procs", measure, show)


if __name__ == "__main__":
    main()
