"""Agent time of one org is added by concurrent completions without one waiting on another.

Spend is kept per org and month; a single row for each made every completion
of an org wait on the row lock of the one before. On PostgreSQL two open
transactions of the same org must both add their time (the second with a
lock timeout, so waiting would fail the test rather than hang it), and on
both databases the org's load reads the exact sum, however the time was split.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection

from tests.conftest import T0, truncate_all
from tests.integration.queue.conftest import make_service, runner, submit
from watchkeeper.clock import ManualClock, to_epoch
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Lease
from watchkeeper.store import Store
from watchkeeper.store.queue.facts import org_loads
from watchkeeper.store.queue.ledger import add_spend
from watchkeeper.store.queue.rows import month_of
from watchkeeper.store.queue.statements import end_statement


def _loads_minutes(store: Store, org: str) -> float:
    with store.engine.connect() as conn:
        return org_loads(conn, [org], T0, lock=False)[org].used_minutes


@pytest.fixture
def pg_store(pg_schema_url: str) -> Iterator[Store]:
    """A store on a fresh PostgreSQL schema."""
    truncate_all(pg_schema_url)
    opened = Store(pg_schema_url)
    yield opened
    opened.close()


def _held_open(store: Store, stack: ExitStack) -> Connection:
    conn = stack.enter_context(store.engine.connect())
    stack.enter_context(conn.begin())
    # Waiting on the other transaction's lock fails at once instead of hanging the test.
    conn.exec_driver_sql("SET LOCAL lock_timeout = '2s'")
    return conn


def _add_directly(conn: Connection, org: str, seconds: float, _lease: Lease) -> None:
    add_spend(conn, False, org, T0, seconds)


def _complete_in_one_statement(conn: Connection, _org: str, seconds: float, lease: Lease) -> None:
    params = {
        "p_id": lease.task.id,
        "p_token": lease.token,
        "p_at": to_epoch(T0) + seconds,
        "p_exit": 0,
        "p_reason": None,
        "p_fingerprint": None,
        "p_month": month_of(T0),
    }
    assert conn.execute(end_statement("succeeded", False), params).first() is not None


@pytest.mark.parametrize(
    "add",
    [_add_directly, _complete_in_one_statement],
    ids=["add_spend", "completion-statement"],
)
def test_two_open_transactions_of_one_org_both_add_spend(
    pg_store: Store, tmp_path: Path, add: Callable[[Connection, str, float, Lease], None]
) -> None:
    queue = make_service(tmp_path, pg_store, ManualClock(T0))
    for _ in range(2):
        submit(queue, org="acme")
    leases = queue.lease(runner(queue).id, limit=2)
    assert len(leases) == 2
    with ExitStack() as first_stack:
        first = _held_open(pg_store, first_stack)
        add(first, "acme", 30.0, leases[0])
        with ExitStack() as second_stack:
            second = _held_open(pg_store, second_stack)
            add(second, "acme", 45.0, leases[1])  # raises on a lock timeout when it waits
        # The second committed while the first still holds its transaction open.
        assert _loads_minutes(pg_store, "acme") == pytest.approx(0.75)
    assert _loads_minutes(pg_store, "acme") == pytest.approx(1.25)


def test_the_load_reads_the_exact_sum_of_every_addition(store: Store) -> None:
    # Several transactions, some adding twice, across two orgs and two months.
    next_month = T0 + timedelta(days=40)
    sqlite = store.engine.dialect.name == "sqlite"
    with ExitStack() as stack:
        conns = [stack.enter_context(store.engine.connect()) for _ in range(2)]
        for conn in conns:
            with conn.begin():
                add_spend(conn, sqlite, "acme", T0, 30.0)
                add_spend(conn, sqlite, "acme", T0, 15.0)
                add_spend(conn, sqlite, "beta", T0, 6.0)
                add_spend(conn, sqlite, "acme", next_month, 600.0)
    with store.engine.connect() as conn:
        loads = org_loads(conn, ["acme", "beta", "idle"], T0, lock=False)
        later = org_loads(conn, ["acme"], next_month, lock=False)
    assert loads["acme"].used_minutes == pytest.approx(1.5)
    assert loads["beta"].used_minutes == pytest.approx(0.2)
    assert loads["idle"].used_minutes == 0.0
    assert later["acme"].used_minutes == pytest.approx(20.0)


def test_completions_charge_the_org_exactly(
    store: Store, queue: QueueService, clock: ManualClock
) -> None:
    for _ in range(4):
        submit(queue, org="free")
    leases = queue.lease(runner(queue, capacity=4).id, limit=4)
    assert len(leases) == 4
    clock.advance(45)  # within the 60 s lease
    for lease in leases:
        queue.complete(lease.task.id, lease.token)
    assert _loads_minutes(store, "free") == pytest.approx(3.0)
