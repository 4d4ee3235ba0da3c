"""Losing presses recorded from many threads at once: each exactly once, a bad one alone refused."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text

from watchkeeper.errors import StoreError
from watchkeeper.runtime import Runtime
from watchkeeper.store.decisions import Press

from ...support.waiting import wait_for
from ..helpers import reports_for, start, sweep

THREADS = 40
NO_SUCH_INCIDENT = 987_654


@contextmanager
def writes_held(url: str) -> Iterator[None]:
    """Another connection holds the presses' write lock until the block ends."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.begin()
                conn.execute(text("LOCK TABLE presses IN EXCLUSIVE MODE"))
            yield
            conn.rollback()
    finally:
        engine.dispose()


def test_presses_queued_together_are_each_recorded_once(runtime: Runtime) -> None:
    start(runtime, "t1", "swarm_task", effects="none")
    reports_for(runtime).fail("swarm_task", "t1", "worker died", None, None)
    incident_id = sweep(runtime).applied.opened[0]
    decisions = runtime.store.decisions
    failures: dict[str, BaseException] = {}

    def press(actor: str, target: int) -> None:
        try:
            decisions.record_press(
                Press(
                    target,
                    runtime.clock(),
                    actor,
                    "api",
                    "dismiss",
                    "tok",
                    "already_decided",
                    f"told {actor}",
                )
            )
        except StoreError as exc:
            failures[actor] = exc

    first = threading.Thread(target=press, args=("@p0", incident_id))
    rest = [threading.Thread(target=press, args=(f"@p{i}", incident_id)) for i in range(1, THREADS)]
    rest.append(threading.Thread(target=press, args=("@nowhere", NO_SUCH_INCIDENT)))
    with writes_held(runtime.store.url):
        first.start()
        # The first press is writing (and waiting for the lock); the rest queue behind it and
        # go to the database together, the row that cannot be written among them.
        wait_for(lambda: decisions._losers._busy and not decisions._losers._pending)
        for thread in rest:
            thread.start()
        wait_for(lambda: len(decisions._losers._pending) == len(rest))
    for thread in [first, *rest]:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in [first, *rest])

    recorded = decisions.presses_for(incident_id)
    assert sorted(p.actor for p in recorded) == sorted(f"@p{i}" for i in range(THREADS))
    assert {p.detail for p in recorded} == {f"told @p{i}" for i in range(THREADS)}
    assert list(failures) == ["@nowhere"]
