"""Routing reads the durable ``routed_at`` mark, so no event is skipped or sent twice.

An id cursor skips an event whose transaction commits after a higher id's;
the mark does not care in which order events become visible.
"""

from __future__ import annotations

import pytest
from sqlalchemy import delete, func, insert, select

from watchkeeper.clock import ManualClock, to_epoch
from watchkeeper.notify.channels.log import LogChannel
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.schema import incident_events, incidents
from watchkeeper.store.schema.notify import deliveries

from ..helpers import start, sweep


def opened_incident(runtime: Runtime, clock: ManualClock, run_id: str = "r1") -> int:
    start(runtime, run_id, budget_s=60, lease_s=3600)
    clock.advance(61)
    return sweep(runtime).applied.opened[0]


def notes(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(deliveries.c.dedup_key).where(deliveries.c.purpose == "note")
        ).scalars()
        return sorted(rows)


def unrouted(store: Store) -> int:
    with store.engine.connect() as conn:
        statement = select(func.count()).where(incident_events.c.routed_at.is_(None))
        return int(conn.execute(statement).scalar_one())


def test_an_event_committed_after_a_higher_id_is_still_routed(
    runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    if store.is_sqlite:
        pytest.skip("SQLite has one writer at a time: ids commit in order")
    incident_id = opened_incident(runtime, clock)
    notifier = runtime.build_notifier({"log": LogChannel()})
    assert notifier.route(clock()) == 1  # the card
    slow = store.engine.connect()
    transaction = slow.begin()
    slow_id = slow.execute(
        insert(incident_events)
        .values(incident_id=incident_id, at=to_epoch(clock()), type="runbook", detail="slow")
        .returning(incident_events.c.id)
    ).scalar_one()
    store.incidents.add_event(incident_id, clock(), "runbook", "fast")
    assert notifier.route(clock()) == 1  # the fast one, whose id is higher
    transaction.commit()
    slow.close()
    assert notifier.route(clock()) == 1  # the slow one, now visible
    assert [key.split(":")[0] for key in notes(store)] == [f"e{slow_id}", f"e{slow_id + 1}"]
    assert unrouted(store) == 0


def test_events_that_make_no_delivery_are_marked_routed_too(
    runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    incident_id = opened_incident(runtime, clock)
    gone_id = opened_incident(runtime, clock, "r2")
    store.incidents.add_event(incident_id, clock(), "unheard_of", "no message for this type")
    with store.engine.begin() as conn:
        conn.execute(delete(incidents).where(incidents.c.id == gone_id))
    notifier = runtime.build_notifier({"log": LogChannel()})
    assert unrouted(store) == 2  # the card of r1 and the unknown type; r2's went with it
    assert notifier.route(clock()) == 1
    assert unrouted(store) == 0
    # A fresh notifier (a restart, or another replica) finds nothing left to route.
    assert runtime.build_notifier({"log": LogChannel()}).route(clock()) == 0


def test_routing_drains_more_than_one_batch(
    runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    incident_id = opened_incident(runtime, clock)
    for index in range(7):
        store.incidents.add_event(incident_id, clock(), "runbook", f"step {index}")
    notifier = runtime.build_notifier({"log": LogChannel()})
    assert notifier.router.route(clock(), limit=3) == 3
    assert notifier.route(clock()) == 5
    assert len(notes(store)) == 7
    assert unrouted(store) == 0
