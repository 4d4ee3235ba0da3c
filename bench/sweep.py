"""One sweep over 100,000 active push runs: seconds, memory, ratio to a bare SELECT.

What it measures: 100,000 running push runs spread over five kinds
(chat_turn, swarm_task, document_job, research_session, crawl), 1% of them
stalled (no progress for longer than their kind's budget, owner alive), are
bulk-loaded straight into ``push_runs``. A ``Runtime`` with a manual clock then
runs ``await runtime.sweeper.sweep()``:

- the first sweep, which opens one incident per stalled run (~1,000);
- the steady-state sweep (median of ``--sweeps``), which changes nothing;
- peak RSS of the process (``ru_maxrss``) and psutil RSS before and after;
- a bare SELECT of the same columns with the raw driver (sqlite3 or psycopg),
  ``WHERE kind = ? AND status IN (...)`` for the five kinds, ``fetchall``;
  the ratio is steady sweep / bare SELECT;
- a breakdown of one sweep (read / judge / plan / write) timed piece by piece
  through the same public functions the sweep calls.

Goals (issue 2): a sweep at most 1 s, peak RSS at most 300 MB, ratio at most 3x.

Run::

    .venv/bin/python bench/sweep.py                 # SQLite
    .venv/bin/python bench/sweep.py --db both --json sweep.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

import _common as common
from watchkeeper.clock import ManualClock
from watchkeeper.config import DEFAULT_BUDGETS
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.heartbeats import SweepBeat
from watchkeeper.store.incidents import Applied
from watchkeeper.store.runs import JUDGE_COLUMNS
from watchkeeper.watch.lifecycle import judge_reads, plan

KINDS = ("chat_turn", "swarm_task", "document_job", "research_session", "crawl")
NOW = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)
COLUMNS = (
    "run_id",
    "kind",
    "title",
    "status",
    "attempt",
    "version",
    "origin",
    "effects",
    "budget_s",
    "expected_s",
    "lease_s",
    "started_at",
    "progress_at",
    "seen_at",
    "finished_at",
    "updated_at",
    "step",
    "failure_reason",
    "failure_fingerprint",
    "detail",
)
SELECT_COLUMNS = ", ".join(column.name for column in JUDGE_COLUMNS)
ACTIVE_SQL = "('queued', 'running', 'waiting')"


# -- loading ------------------------------------------------------------------------------------


def generate(total: int, stalled_every: int, seed: int = 7) -> Iterator[tuple[Any, ...]]:
    """Rows for ``push_runs``: running, owner alive, one in ``stalled_every`` stalled per kind."""
    rng = random.Random(seed)
    now_s = NOW.timestamp()
    for i in range(total):
        kind = KINDS[i % len(KINDS)]
        budget = DEFAULT_BUDGETS[kind]
        stalled = (i // len(KINDS)) % stalled_every == 0
        if stalled:
            progress_at = now_s - budget - rng.uniform(1.0, 3600.0)
        else:
            progress_at = now_s - rng.uniform(0.0, budget * 0.5)
        started_at = progress_at - rng.uniform(0.0, 7200.0)
        seen_at = now_s - rng.uniform(0.0, 30.0)
        origin = (
            json.dumps({"platform": "telegram", "chat_id": str(1000 + i % 97)})
            if i % 3 == 0
            else None
        )
        yield (
            f"{kind}-{i:07d}",
            kind,
            f"{kind.replace('_', ' ')} {i}",
            "running",
            1,
            1 + i % 7,
            origin,
            "unknown",
            None,
            None,
            90.0,
            started_at,
            progress_at,
            seen_at,
            None,
            seen_at,
            f"step {i % 10} of 10",
            None,
            None,
            None,
        )


def load(store: Store, total: int, stalled_every: int) -> float:
    """Bulk-insert the rows straight into ``push_runs``; returns the seconds it took."""
    started = time.perf_counter()
    raw = store.engine.raw_connection()
    try:
        driver: Any = raw.driver_connection
        if store.is_sqlite:
            _load_sqlite(driver, total, stalled_every)
        else:
            _load_postgresql(driver, total, stalled_every)
            raw.commit()
    finally:
        raw.close()
    return time.perf_counter() - started


def _load_sqlite(conn: Any, total: int, stalled_every: int) -> None:
    marks = ", ".join("?" for _ in COLUMNS)
    conn.execute("BEGIN")
    conn.executemany(
        f"INSERT INTO push_runs ({', '.join(COLUMNS)}) VALUES ({marks})",  # noqa: S608
        generate(total, stalled_every),
    )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")


def _load_postgresql(conn: Any, total: int, stalled_every: int) -> None:
    with conn.cursor() as cursor:
        with cursor.copy(f"COPY push_runs ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for row in generate(total, stalled_every):
                copy.write_row(row)
        cursor.execute("ANALYZE push_runs")


# -- the bare SELECT ----------------------------------------------------------------------------


def bare_select(db_url: str) -> float:
    """Seconds to fetch the same columns of the active runs of the five kinds, raw driver."""
    conn, mark = _driver_connect(db_url)
    try:
        started = time.perf_counter()
        rows = 0
        cursor = conn.cursor()
        for kind in KINDS:
            cursor.execute(
                f"SELECT {SELECT_COLUMNS} FROM push_runs "  # noqa: S608
                f"WHERE kind = {mark} AND status IN {ACTIVE_SQL}",
                (kind,),
            )
            rows += len(cursor.fetchall())
        elapsed = time.perf_counter() - started
        cursor.close()
    finally:
        conn.close()
    assert rows > 0
    return elapsed


def _driver_connect(db_url: str) -> tuple[Any, str]:
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        import sqlite3

        return sqlite3.connect(str(url.database)), "?"
    import psycopg

    options = url.query.get("options")
    return (
        psycopg.connect(
            host=url.host,
            port=url.port or 5432,
            user=url.username,
            dbname=url.database,
            options=options if isinstance(options, str) else None,
        ),
        "%s",
    )


# -- the sweep and its breakdown ----------------------------------------------------------------


async def timed_sweep(runtime: Runtime) -> tuple[float, Applied, int]:
    """Seconds for one sweep, what it applied, and how many runs it judged."""
    started = time.perf_counter()
    result = await runtime.sweeper.sweep()
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"the sweep failed: {result.error}")
    runs = sum(read.considered for read in result.reads if read.readable)
    return elapsed, result.applied, runs


async def breakdown(runtime: Runtime, now: datetime) -> dict[str, float]:
    """One sweep timed piece by piece, through the functions ``Supervisor.sweep`` calls."""
    supervisor = runtime.sweeper
    store = runtime.store
    parts: dict[str, float] = {}
    live = _timed(parts, "read live incidents", lambda: store.incidents.live(list(KINDS)))
    started = time.perf_counter()
    reads = await supervisor.read_for_sweep(now, live)
    parts["sweep read (5 kinds concurrently)"] = time.perf_counter() - started
    judged = _timed(parts, "judge", lambda: judge_reads(reads, supervisor.specs, now))
    suppressed = _timed(
        parts, "read dismissed keys", lambda: store.decisions.suppressed_keys(list(judged))
    )
    changes = _timed(parts, "plan", lambda: plan(judged, live, suppressed))
    _timed(parts, "write incidents", lambda: store.incidents.apply(changes, now))
    runs = sum(read.considered for read in reads)
    beat = SweepBeat(supervisor.replica, now, now, 0.0, runs, None)
    _timed(parts, "write heartbeat", lambda: store.heartbeats.beat(beat))
    _timed(parts, "next deadline", lambda: supervisor.earliest(reads, judged, now))
    parts["total"] = sum(parts.values())
    return parts


def _timed(parts: dict[str, float], name: str, call: Any) -> Any:
    started = time.perf_counter()
    result = call()
    parts[name] = time.perf_counter() - started
    return result


def read_split(runtime: Runtime, now: datetime) -> dict[str, float]:
    """The read, one kind after another: SQL rows only, then rows plus building RunViews."""
    store = runtime.store
    from watchkeeper.kinds.push import FINISHED_WINDOW

    started = time.perf_counter()
    for kind in KINDS:
        store.runs.rows_for_judging(kind, now - FINISHED_WINDOW)
    rows_s = time.perf_counter() - started
    started = time.perf_counter()
    for kind in KINDS:
        runtime.sweeper.adapters[kind].read(now)
    views_s = time.perf_counter() - started
    return {
        "full read, rows via SQLAlchemy (sequential)": rows_s,
        "full read, rows + RunViews (sequential)": views_s,
    }


def clear_incidents(store: Store) -> None:
    """Forget every incident, so the next sweep opens them again."""
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM incident_events"))
        conn.execute(text("DELETE FROM incidents"))


# -- the benchmark ------------------------------------------------------------------------------


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Everything for one database."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-sweep-") as folder,
        common.database(backend, Path(folder)) as url,
    ):
        return asyncio.run(_measure(url, Path(folder), args))


async def _measure(url: str, folder: Path, args: argparse.Namespace) -> common.Figures:
    store = Store(url)
    load_s = load(store, args.runs, args.stalled_every)
    bare = [bare_select(url) for _ in range(args.sweeps)]
    clock = ManualClock(NOW)
    settings = common.settings_for(folder, url)
    rss_before = common.rss_mb()
    runtime = Runtime.open(settings, clock=clock, store=store)
    try:
        first_s, first_applied, runs = await timed_sweep(runtime)
        steady: list[float] = []
        for _ in range(args.sweeps):
            clock.advance(1.0)
            elapsed, applied, _runs = await timed_sweep(runtime)
            assert not applied.opened, "a steady-state sweep opened incidents"
            steady.append(elapsed)
        rss_after = common.rss_mb()
        steady_parts = await breakdown(runtime, clock())
        split = read_split(runtime, clock())
        clear_incidents(store)
        first_parts = await breakdown(runtime, clock())
    finally:
        runtime.close()
    steady_s = statistics.median(steady)
    bare_s = statistics.median(bare)
    return {
        "runs": runs,
        "stalled_expected": args.runs // args.stalled_every,
        "load_s": load_s,
        "first_sweep_s": first_s,
        "first_sweep_opened": len(first_applied.opened) + len(first_applied.reopened),
        "steady_sweep_s": steady_s,
        "steady_sweeps_s": steady,
        "bare_select_s": bare_s,
        "ratio_steady_to_bare": steady_s / bare_s,
        "ratio_first_to_bare": first_s / bare_s,
        "rss_before_runtime_mb": rss_before,
        "rss_after_sweeps_mb": rss_after,
        "peak_rss_mb": common.peak_rss_mb(),
        "breakdown_first_s": first_parts,
        "breakdown_steady_s": steady_parts,
        "read_split_s": split,
    }


def show(backend: str, f: common.Figures) -> None:
    """Print one database's figures."""
    common.print_table(
        f"sweep over {f['runs']:,} active push runs ({backend})",
        [
            ("bulk load (s)", f["load_s"]),
            ("first sweep (s)", f["first_sweep_s"]),
            ("incidents opened by it", f["first_sweep_opened"]),
            ("steady sweep, median (s)", f["steady_sweep_s"]),
            ("bare SELECT, median (s)", f["bare_select_s"]),
            ("ratio steady / bare", f"{f['ratio_steady_to_bare']:.1f}x  (goal <= 3x)"),
            ("ratio first / bare", f"{f['ratio_first_to_bare']:.1f}x"),
            ("RSS before runtime (MB)", f["rss_before_runtime_mb"]),
            ("RSS after sweeps (MB)", f["rss_after_sweeps_mb"]),
            ("peak RSS (MB)", f"{f['peak_rss_mb']:.0f}  (goal <= 300)"),
        ],
    )
    for title, parts in (
        ("breakdown of a first sweep (s)", f["breakdown_first_s"]),
        ("breakdown of a steady sweep (s)", f["breakdown_steady_s"]),
        ("read, kind after kind (s)", f["read_split_s"]),
    ):
        common.print_table(f"{title} ({backend})", list(parts.items()))


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--runs", type=int, default=100_000, help="active push runs")
    parser.add_argument("--stalled-every", type=int, default=100, help="1 in N runs is stalled")
    parser.add_argument("--sweeps", type=int, default=5, help="steady-state sweeps (median)")
    args = parser.parse_args()
    common.run_backends(args, "sweep", measure, show)


if __name__ == "__main__":
    main()
