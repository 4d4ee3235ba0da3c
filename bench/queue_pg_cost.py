"""Where PostgreSQL's CPU goes in a runner's pass: the one-statement pass, whole and with
parts left out (for measurement only: a pass without them is not a correct pass).

One runner leases and ends no-op tasks in batches of ``--batch`` through
``QueueService.report_and_lease`` (the in-process path of ``bench/queue_drain.py``),
alone, so nothing contends. For each variant a fresh schema is filled and analyzed,
then ``--passes`` passes are timed after a warm-up; the figure is the CPU the
connection's PostgreSQL backends spent per task, read from the operating system.

Variants: ``whole``; ``no-timeline`` (no timeline rows); ``no-spend`` (no spend row);
``ids-only`` (ended tasks answered by id, not as whole rows); ``fewer-indexes`` (the whole
statement, with the ``job_id``, ``runner_id`` and ``finished_at`` indexes of
``queue_tasks`` dropped). Task tokens cost nothing here: they are derived, not stored.

Run::

    .venv-bench/bin/python bench/queue_pg_cost.py --rounds 2
"""

from __future__ import annotations

import sys

# This folder holds queue.py, which would shadow the standard library's queue module.
sys.path.append(sys.path.pop(0))

import argparse
import re
import statistics
import tempfile
from pathlib import Path

import psutil
from sqlalchemy import text

from _common import database, print_table, settings_for
from queue_drain import _analyze, _fill, _runners
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import TaskStatus
from watchkeeper.store import Store
from watchkeeper.store.queue import End, onepass

WHOLE = onepass.END_AND_LEASE_SQL
VARIANTS = ("whole", "no-timeline", "one-timeline-row", "no-spend", "ids-only", "fewer-indexes")


def _without(sql: str, part: str, following: str) -> str:
    """``sql`` with the named common table expression doing nothing."""
    pattern = rf"{part} AS \(.*?\n\), {following}"
    left_out = re.sub(pattern, f"{part} AS (SELECT 1\n), {following}", sql, flags=re.S)
    assert left_out != sql, part
    return left_out


def _without_lease_entry(sql: str) -> str:
    return re.sub(
        r"leased_logged AS \(.*?\n\)\nSELECT",
        "leased_logged AS (SELECT 1\n)\nSELECT",
        sql,
        flags=re.S,
    )


def _variant_sql(name: str) -> str:
    if name == "no-timeline":
        return _without_lease_entry(_without(WHOLE, "ended_logged", "runner"))
    if name == "one-timeline-row":
        return _without_lease_entry(WHOLE)
    if name == "ids-only":
        return WHOLE.replace("json_agg(m)", "json_agg(json_build_object('id', m.id))")
    if name == "no-spend":
        return _without(WHOLE, "spent", "ended_logged")
    return WHOLE


def _backends() -> set[int]:
    """The PostgreSQL backends serving this process's connections."""
    mine = {c.laddr.port for c in psutil.Process().net_connections("tcp")
            if c.raddr and c.raddr.port == 5432}  # fmt: skip
    return {c.pid for c in psutil.net_connections("tcp")
            if c.pid and c.laddr and c.laddr.port == 5432
            and c.raddr and c.raddr.port in mine}  # fmt: skip


def _cpu_s(pids: set[int]) -> float:
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def measure(name: str, args: argparse.Namespace) -> float:
    """PostgreSQL CPU milliseconds per task for one variant."""
    onepass.END_AND_LEASE_SQL = _variant_sql(name)
    whole_rows = onepass.task_from_row
    # ``ids-only`` answers an ended task with its id alone: read no more of it.
    onepass.task_from_row = lambda row: row if len(row) == 1 else whole_rows(row)
    try:
        with tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp, \
                database("postgresql", Path(tmp)) as url:  # fmt: skip
            store = Store(url)
            queue = QueueService(store, settings_for(Path(tmp), url))
            _fill(queue, (args.passes + 40) * args.batch)
            if name == "fewer-indexes":
                with store.engine.begin() as conn:
                    for index in ("job_id", "runner_id", "finished_at"):
                        conn.execute(text(f"DROP INDEX ix_queue_tasks_{index}"))
            _analyze(url)
            runner = _runners(queue, 1, args.batch)[0]
            leases = queue.report_and_lease(runner, [], args.batch)[1]

            def passes(count: int) -> None:
                nonlocal leases
                for _ in range(count):
                    ends = [End(x.task.id, x.token, TaskStatus.SUCCEEDED, 0) for x in leases]
                    leases = queue.report_and_lease(runner, ends, args.batch)[1]

            passes(30)
            pids = _backends()
            began = _cpu_s(pids)
            passes(args.passes)
            spent = _cpu_s(pids) - began
            store.close()
            return 1000 * spent / (args.passes * args.batch)
    finally:
        onepass.END_AND_LEASE_SQL = WHOLE
        onepass.task_from_row = whole_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=400)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    args = parser.parse_args()
    names = tuple(args.variants.split(","))
    figures: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            figures[name].append(measure(name, args))
    whole = statistics.median(figures["whole"])
    rows: list[tuple[str, object]] = []
    for name in names:
        median = statistics.median(figures[name])
        rows.append((f"{name}: PostgreSQL CPU ms per task (median)",
                     f"{median:.4f}  ({median - whole:+.4f})"))  # fmt: skip
    print_table(f"one runner, batch {args.batch}, {args.passes} passes, {args.rounds} rounds", rows)


if __name__ == "__main__":
    main()
