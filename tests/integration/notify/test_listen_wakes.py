"""LISTEN/NOTIFY: an incident event written by one replica wakes the others at once."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import text

from watchkeeper.clock import ManualClock
from watchkeeper.runtime import Runtime
from watchkeeper.server.api import events as routes_events
from watchkeeper.store import Store
from watchkeeper.store.listen import Listener

from ...support.live_server import LiveServer, live_server
from ...support.waiting import wait_for
from ..helpers import start, sweep


class Calls:
    """Counts callback calls; a waiter is told of each one."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = threading.Condition()

    def __call__(self) -> None:
        with self.changed:
            self.count += 1
            self.changed.notify_all()

    def after(self, seen: int) -> bool:
        return self.count > seen


@pytest.fixture
def pg_store(store: Store) -> Store:
    if store.is_sqlite:
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    return store


@pytest.fixture
def listening(pg_store: Store) -> Iterator[tuple[Listener, Calls]]:
    """A listener on an engine of its own, started and listening."""
    other = Store(pg_store.url, migrate=False)
    listener = Listener(other.engine)
    calls = Calls()
    listener.add(calls)
    listener.start()
    wait_for(lambda: listener.listening, what="the listener listening")
    yield listener, calls
    listener.stop()
    other.close()


def test_an_event_written_through_another_store_calls_back(
    listening: tuple[Listener, Calls], runtime: Runtime, pg_store: Store, clock: ManualClock
) -> None:
    listener, calls = listening
    seen = calls.count
    start(runtime, "r1", budget_s=60, lease_s=3600)
    clock.advance(61)
    incident_id = sweep(runtime).applied.opened[0]
    wait_for(lambda: calls.after(seen), what="a call for the opening", changed=calls.changed)
    seen = calls.count
    pg_store.incidents.add_event(incident_id, clock(), "runbook", "step 1")
    wait_for(lambda: calls.after(seen), what="a call for the event", changed=calls.changed)
    listener.stop()
    assert listener._thread is not None and not listener._thread.is_alive()


def test_a_dropped_connection_is_listened_on_again(
    listening: tuple[Listener, Calls], runtime: Runtime, pg_store: Store, clock: ManualClock
) -> None:
    listener, calls = listening
    first = listener.backend_pid
    with pg_store.engine.begin() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
    second = wait_for(
        lambda: listener.backend_pid if listener.backend_pid not in {None, first} else None,
        what="a new listening connection",
    )
    assert second != first
    seen = calls.count
    start(runtime, "r1", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    wait_for(lambda: calls.after(seen), what="a call after reconnecting", changed=calls.changed)
    assert calls.count > seen  # the event written after the reconnect was heard


def test_queueing_deliveries_wakes_every_replica_to_deliver(
    listening: tuple[Listener, Calls], runtime: Runtime, pg_store: Store, clock: ManualClock
) -> None:
    _, calls = listening
    seen = calls.count
    start(runtime, "r1", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    wait_for(lambda: calls.after(seen), what="a call for the opening", changed=calls.changed)
    seen = calls.count
    assert runtime.build_notifier({}).route(clock()) == 1
    wait_for(lambda: calls.after(seen), what="a call for the queued card", changed=calls.changed)


def test_on_sqlite_the_listener_does_nothing(store: Store) -> None:
    if not store.is_sqlite:
        pytest.skip("the SQLite case")
    listener = Listener(store.engine)
    listener.add(lambda: None)
    listener.start()
    assert not listener.listening
    listener.stop()


def test_an_event_stream_is_told_when_another_replica_writes_an_incident_event(
    runtime: Runtime, pg_store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Frequent keep-alives let the reader see that it is done.
    monkeypatch.setattr(routes_events, "KEEP_ALIVE_S", 0.1)
    start(runtime, "r1", budget_s=60, lease_s=3600)
    clock.advance(61)
    incident_id = sweep(runtime).applied.opened[0]
    other = Store(pg_store.url, migrate=False)
    listener = Listener(other.engine)
    with live_server(runtime) as server:
        assert server.server is not None
        app = server.server.config.app
        listener.add(lambda: routes_events.wake_streams(app))
        listener.start()
        # Listening first: the call it makes on connecting is over before the stream opens.
        wait_for(lambda: listener.listening, what="the listener listening")
        with stream_of(server) as seen:
            pg_store.incidents.add_event(incident_id, clock(), "runbook", "step 1")
            wait_for(
                lambda: ("incidents.changed", {"type": "incidents.changed"}) in seen,
                what="incidents.changed on the stream",
            )
        listener.stop()
    other.close()


@contextmanager
def stream_of(server: LiveServer) -> Iterator[list[tuple[str, Any]]]:
    """``GET /api/v1/events`` read in a thread, once subscribed: the events seen so far."""
    seen: list[tuple[str, Any]] = []
    subscribed = threading.Event()
    done = threading.Event()

    def read() -> None:
        with (
            server.client("viewer") as http,
            http.stream("GET", "/api/v1/events") as response,
        ):
            event = ""
            for line in response.iter_lines():
                if line == ": subscribed":
                    subscribed.set()
                elif line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    seen.append((event, json.loads(line.removeprefix("data: "))))
                if done.is_set():
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_for(subscribed.is_set, what="the event stream subscribed")
    try:
        yield seen
    finally:
        done.set()
        reader.join(timeout=10)
