"""Every kind agrees on "the same failure": numbers in a reason open no new incident, and
a Dismiss silences every later occurrence. On SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import update

from watchkeeper.clock import ManualClock
from watchkeeper.decide.actors import Actor
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs import identity
from watchkeeper.records.procs import NewProc, ProcStatus
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.procs import ProcStore
from watchkeeper.store.schema.procs import proc_runs

from ..conftest import make_settings
from .helpers import reports_for, start, sweep
from .queue.conftest import make_service, runner, submit

ANA = Actor("@ana", "api", is_admin=True)


#: What three failures differing only in a number must do: one incident opened by the first,
#: none by the second, none opened or reopened by the third (dismissed), none live, one in all.
ONE_INCIDENT_DISMISSED_FOR_GOOD = ((1, 0, 0), 0, 0, 1)


def same_failure_twice_then_dismissed(
    runtime: Runtime, clock: ManualClock, fail: Callable[[int], None], again: Callable[[], None]
) -> tuple[tuple[int, int, int], int, int, int]:
    """``fail(n)`` ends the work with a reason holding ``n``; ``again()`` restarts it.

    Fails it with 7, 8 (then Dismiss) and 9; answers the incidents each failure opened, the
    ones the third reopened, the live ones and all of them.
    """
    fail(7)
    first = sweep(runtime).applied.opened
    again()
    clock.advance(1)
    sweep(runtime)
    fail(8)
    second = sweep(runtime).applied.opened
    if first:
        incident = runtime.store.incidents.get(first[0])
        assert runtime.decider.press(first[0], "dismiss", incident.state_token, ANA).won
    again()
    clock.advance(1)
    sweep(runtime)
    fail(9)
    third = sweep(runtime).applied
    return (
        (len(first), len(second), len(third.opened)),
        len(third.reopened),
        len(runtime.store.incidents.list("live")),
        len(runtime.store.incidents.list()),
    )


def test_push(runtime: Runtime, clock: ManualClock) -> None:
    reports = reports_for(runtime)
    start(runtime, "c1")
    assert (
        same_failure_twice_then_dismissed(
            runtime,
            clock,
            lambda n: reports.fail("crawl", "c1", f"timed out after {n} s", None, None),
            lambda: start(runtime, "c1"),
        )
        == ONE_INCIDENT_DISMISSED_FOR_GOOD
    )


def test_task(runtime: Runtime, tmp_path: Path, clock: ManualClock) -> None:
    queue = make_service(tmp_path, runtime.store, clock, queue={"lease_s": 60})
    daemon = runner(queue)
    job = submit(queue)

    def fail(n: int) -> None:
        [lease] = queue.lease(daemon.id)
        queue.fail(lease.task.id, lease.token, f"worker 10.0.0.{n} ran out of memory")

    assert (
        same_failure_twice_then_dismissed(
            runtime, clock, fail, lambda: queue.retry(job.id) and None
        )
        == ONE_INCIDENT_DISMISSED_FOR_GOOD
    )


def test_sql(tmp_path: Path, store: Store, clock: ManualClock) -> None:
    path = tmp_path / "crawler.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE crawls (id TEXT, state TEXT, error TEXT)")
        conn.execute("INSERT INTO crawls VALUES ('z', 'running', NULL)")
    query = "SELECT id AS run_id, state AS status, error AS failure_reason FROM crawls"
    kinds = {"crawler": {"adapter": "sql", "url": f"sqlite:///{path}", "query": query}}
    settings = make_settings(tmp_path, store.url, kinds=kinds)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))

    def set_row(state: str, error: str | None) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE crawls SET state = ?, error = ?", (state, error))

    try:
        assert (
            same_failure_twice_then_dismissed(
                runtime,
                clock,
                lambda n: set_row("failed", f"HTTP 503 on page {n}"),
                lambda: set_row("running", None),
            )
            == ONE_INCIDENT_DISMISSED_FOR_GOOD
        )
    finally:
        runtime.sweeper.close()


def test_sql_keeps_the_fingerprint_its_query_supplies(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "crawler.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE crawls (id TEXT, state TEXT, error TEXT, fp TEXT)")
        conn.execute("INSERT INTO crawls VALUES ('z', 'failed', 'HTTP 503 on page 7', 'mine')")
    query = (
        "SELECT id AS run_id, state AS status, error AS failure_reason, "
        "fp AS failure_fingerprint FROM crawls"
    )
    kinds = {"crawler": {"adapter": "sql", "url": f"sqlite:///{path}", "query": query}}
    settings = make_settings(tmp_path, store.url, kinds=kinds)
    runtime = Runtime.open(settings, store=store, notifier=OpsNotifier(settings.ops))
    try:
        [view] = runtime.sweeper.adapters["crawler"].read(runtime.clock())
        assert view.failure is not None and view.failure.fingerprint == "mine"
    finally:
        runtime.sweeper.close()


def test_process(runtime: Runtime, tmp_path: Path, clock: ManualClock) -> None:
    procs = ProcStore(runtime.store.engine)
    new = NewProc(
        "p-lost0000001",
        "lost",
        ("true",),
        str(tmp_path),
        identity.host(),
        "me",
        identity.boot_id(),
        detach=True,
    )
    procs.register(new, clock())

    def fail(n: int) -> None:
        # A run that ended without a witness is described in words; numbers vary between looks.
        reason = f"the shim vanished after {n} s"
        if not procs.finish(new.run_id, ProcStatus.FAILED, clock(), reason=reason):
            with runtime.store.engine.begin() as conn:
                conn.execute(
                    update(proc_runs)
                    .where(proc_runs.c.run_id == new.run_id)
                    .values(status=ProcStatus.FAILED.value, reason=reason)
                )

    def again() -> None:
        with runtime.store.engine.begin() as conn:
            conn.execute(
                update(proc_runs)
                .where(proc_runs.c.run_id == new.run_id)
                .values(status=ProcStatus.RUNNING.value, reason=None, finished_at=None)
            )

    assert (
        same_failure_twice_then_dismissed(runtime, clock, fail, again)
        == ONE_INCIDENT_DISMISSED_FOR_GOOD
    )
