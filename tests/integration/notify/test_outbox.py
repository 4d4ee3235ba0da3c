"""The outbox: who is told what, once; how each kind of failed send is settled."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.log import LogChannel
from watchkeeper.notify.channels.webhook import WebhookChannel
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.outbox import DeliveryStatus

from ...conftest import make_settings
from ..helpers import reports_for, start, sweep
from ..recorder import recording_server


def runtime_with(tmp_path: Path, store: Store, clock: ManualClock, **overrides: object) -> Runtime:
    settings = make_settings(tmp_path, store.url, **overrides)
    return Runtime.open(settings, clock=clock, store=store)


def statuses(store: Store) -> list[tuple[str, str, str]]:
    from sqlalchemy import select

    from watchkeeper.store.schema.notify import deliveries

    with store.engine.connect() as conn:
        rows = conn.execute(select(deliveries).order_by(deliveries.c.id)).all()
    return [(r.purpose, r.channel, r.status) for r in rows]


def test_cards_go_where_the_work_started_else_to_ops(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    runtime = runtime_with(tmp_path, store, clock, ops={"channels": ["log", "slack:COPS"]})
    notifier = runtime.build_notifier({"log": LogChannel()})
    start(
        runtime,
        "from-chat",
        budget_s=60,
        lease_s=3600,
        origin={"platform": "telegram", "chat_id": "-100", "thread_id": "7"},
    )
    start(runtime, "no-chat", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    assert notifier.route(clock()) == 3
    from watchkeeper.notify.message import Target

    targets = sorted(
        (d.purpose, Target.from_json(d.target).place)
        for i in store.incidents.list("open")
        for d in store.outbox.for_incident(i.id)
    )
    assert targets == [("card", "log:/"), ("card", "slack:COPS/"), ("card", "telegram:-100/7")]
    # Routing again, or from a fresh router after a restart, enqueues nothing new.
    assert notifier.route(clock()) == 0
    assert runtime.build_notifier({"log": LogChannel()}).route(clock()) == 0
    runtime.sweeper.close()


def test_one_card_notes_under_it_and_edits_when_moved_again_and_decided(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    from watchkeeper.decide.actors import Actor

    runtime = runtime_with(tmp_path, store, clock)
    log_channel = LogChannel()
    notifier = runtime.build_notifier({"log": log_channel})
    start(runtime, "s1", budget_s=60, lease_s=3600)
    clock.advance(61)
    incident_id = sweep(runtime).applied.opened[0]
    for _ in range(3):
        sweep(runtime)
    notifier.route(clock())
    assert asyncio.run(notifier.deliver_due()) == 1
    card = log_channel.recent[-1][1]
    assert "has stalled" in card.text
    assert [b.label for b in card.buttons] == [
        "Dismiss",
        "Ask to diagnose",
        "Silence 1 h",
        "I am on it",
    ]
    reports_for(runtime).progress("crawl", "s1", "page 9", None)
    sweep(runtime)
    notifier.route(clock())
    asyncio.run(notifier.deliver_due())
    texts = [m.text for _, m in log_channel.recent]
    assert "crawl s1 is moving again (moved again: page 9)" in texts
    clock.advance(61)
    sweep(runtime)  # stalls again: the same incident reopens; a note, and the card comes back
    notifier.route(clock())
    asyncio.run(notifier.deliver_due())
    token = store.incidents.get(incident_id).state_token
    runtime.decider.press(incident_id, "dismiss", token, Actor("@ana", "api", True))
    notifier.route(clock())
    asyncio.run(notifier.deliver_due())
    assert [p for p, _, _ in statuses(store)] == [
        "card",
        "note",
        "update",
        "note",
        "update",
        "update",
    ]
    assert all(s == "sent" for _, _, s in statuses(store))
    edited = log_channel.recent[-1][1]
    assert "Decided: Dismiss by @ana" in edited.text
    assert edited.buttons == ()
    runtime.sweeper.close()


def test_a_kind_that_reports_itself_gets_no_message(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    runtime = runtime_with(tmp_path, store, clock, kinds={"crawl": {"reports_itself": True}})
    notifier = runtime.build_notifier({"log": LogChannel()})
    start(runtime, "quiet", budget_s=60, lease_s=3600)
    clock.advance(61)
    assert len(sweep(runtime).applied.opened) == 1
    assert notifier.route(clock()) == 0
    assert store.incidents.list("open")  # recorded all the same
    runtime.sweeper.close()


@pytest.fixture
def hanging() -> Iterator[str]:
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            release.wait(20)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    release.set()
    server.shutdown()
    server.server_close()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/hook"


def settle_one(
    tmp_path: Path, store: Store, clock: ManualClock, url: str, timeout_s: float = 5.0
) -> tuple[str, object]:
    runtime = runtime_with(
        tmp_path,
        store,
        clock,
        ops={"channels": ["webhook"], "webhook_url": url, "timeout_s": timeout_s},
    )
    notifier = runtime.build_notifier({"webhook": WebhookChannel(runtime.settings.ops)})
    reports_for(runtime).start(
        __import__("watchkeeper.store.runs", fromlist=["NewRun"]).NewRun(
            "crawl", "w1", "t", None, "none", None, None, 90
        )
    )
    reports_for(runtime).fail("crawl", "w1", "boom", None, None)
    incident_id = sweep(runtime).applied.opened[0]
    notifier.route(clock())
    asyncio.run(notifier.deliver_due())
    delivery = store.outbox.for_incident(incident_id)[0]
    asyncio.run(notifier.aclose())
    runtime.sweeper.close()
    return delivery.status.value, delivery


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, "sent"),
        (400, "failed"),
        (403, "failed"),
        (429, "pending"),
        (500, "maybe_sent"),
        (503, "maybe_sent"),
    ],
)
def test_each_answer_is_settled_its_own_way(
    tmp_path: Path, store: Store, clock: ManualClock, status: int, expected: str
) -> None:
    with recording_server(status=status) as hook:
        got, delivery = settle_one(tmp_path, store, clock, hook.url + "/hook")
        assert len(hook.requests) == 1
    assert got == expected
    incident = store.incidents.get(delivery.incident_id)  # type: ignore[attr-defined]
    if expected == "maybe_sent":
        assert incident.events[-1].detail.startswith("webhook: the message may not have arrived")
    if expected == "pending":
        assert delivery.next_attempt_at > clock()  # type: ignore[attr-defined]


def test_a_refused_connection_is_retried(tmp_path: Path, store: Store, clock: ManualClock) -> None:
    assert settle_one(tmp_path, store, clock, closed_port())[0] == "pending"


def test_a_hang_is_maybe_sent_and_never_resent(
    tmp_path: Path, store: Store, clock: ManualClock, hanging: str
) -> None:
    status, _ = settle_one(tmp_path, store, clock, hanging, timeout_s=0.5)
    assert status == "maybe_sent"
    assert store.outbox.due(clock() + timedelta(days=1)) == []


def test_interrupted_calls_become_maybe_sent_at_start(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    runtime = runtime_with(tmp_path, store, clock)
    notifier = runtime.build_notifier({"log": LogChannel()})
    start(runtime, "s1", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    notifier.route(clock())
    delivery = store.outbox.due(clock())[0]
    assert store.outbox.claim(delivery.id, "crashed-deliverer", clock())
    assert store.outbox.start(delivery.id, "crashed-deliverer", clock())
    # The process dies mid-call; the next start finds the row in 'sending', its call started.
    assert runtime.build_notifier({"log": LogChannel()}).recover(clock()) == [delivery.id]
    assert store.outbox.get(delivery.id).status is DeliveryStatus.MAYBE_SENT
    assert store.outbox.due(clock() + timedelta(days=1)) == []
    runtime.sweeper.close()
