"""A routing pass reads its incidents and their action journals in one statement each and
queues its deliveries in one insert, however many incidents it covers; each card still goes
to its own chat, says what its incident says, and a second routing of the same events
queues nothing new."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.log import LogChannel
from watchkeeper.notify.message import Message, Target
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.queueing import NewDelivery

from ..helpers import start, sweep

INCIDENTS = 12


@contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    """Every SQL statement sent on ``store``'s engine while inside."""
    sent: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(" ".join(statement.split()))

    event.listen(store.engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(store.engine, "before_cursor_execute", note)


def _open(runtime: Runtime, clock: ManualClock) -> None:
    for index in range(INCIDENTS):
        origin = {"platform": "slack", "chat_id": f"C{index:03d}"}
        start(runtime, f"r{index}", budget_s=60, lease_s=3600, origin=origin)
    clock.advance(61)
    assert len(sweep(runtime).applied.opened) == INCIDENTS


def test_a_pass_reads_and_queues_in_bulk(
    runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    _open(runtime, clock)
    notifier = runtime.build_notifier({"log": LogChannel()})
    with statements(store) as sent:
        assert notifier.route(clock()) == INCIDENTS

    assert sum(s.startswith("SELECT") and " FROM incidents " in f"{s} " for s in sent) == 1
    assert sum(" FROM actions " in f"{s} " for s in sent) == 1
    assert sum(s.startswith("INSERT INTO deliveries") for s in sent) == 1
    rows = store.outbox.counts()
    assert rows == {"pending": INCIDENTS}
    by_run = {i.key.run_id: i for i in store.incidents.list()}
    for index in range(INCIDENTS):
        incident = by_run[f"r{index}"]
        (card,) = store.outbox.for_incident(incident.id)
        assert card.purpose == "card"
        assert Target.from_json(card.target) == Target("slack", f"C{index:03d}")
        assert incident.title in card.payload["text"]


def test_queueing_the_same_events_again_adds_nothing_and_marks_them_routed(
    runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    _open(runtime, clock)
    events = store.incidents.unrouted()
    ids = [event_id for event_id, _, _ in events]
    target = Target("log", "ops").as_dict()
    items = [
        NewDelivery(
            f"e{event_id}:log:card",
            incident_id,
            "card",
            "log",
            target,
            Message(f"card {event_id}").as_dict(),
        )
        for event_id, incident_id, _ in events
    ]
    # Another replica routed the same events first: its rows stand, nothing is added twice.
    assert store.outbox.route(ids, items, clock()) == len(events)
    assert store.outbox.route(ids, [*items, items[0]], clock()) == 0
    assert store.outbox.counts() == {"pending": len(events)}
    assert store.incidents.unrouted() == []
    queued = [d for i in store.incidents.list() for d in store.outbox.for_incident(i.id)]
    assert sorted(d.dedup_key for d in queued) == sorted(i.dedup_key for i in items)
    # Queued in the order given: a card's id comes before those of anything after it.
    assert [d.dedup_key for d in sorted(queued, key=lambda d: d.id)] == [i.dedup_key for i in items]
