"""A send whose settle meets a moment of database unavailability is still recorded as sent.

The database is reached through a proxy of this test's own, cut while the
platform call is in flight and restored a moment later: the settle must be
tried again rather than leave the row ``sending`` for minutes (and then
marked "maybe sent" although it went out).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.base import Channel, SendOutcome, SendResult
from watchkeeper.notify.deliverer import Deliverer
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.queueing import NewDelivery

from ...support.tcp_proxy import TcpProxy, tcp_proxy

#: How long the database stays away once the call cut it: a blip, far below any claim.
BLIP_S = 0.5


class CuttingChannel(Channel):
    """Sends fine, but takes the database away while doing so."""

    name = "log"

    def __init__(self, proxy: TcpProxy) -> None:
        self.proxy = proxy
        self.sent: list[str] = []

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        self.sent.append(idempotency_key)
        self.proxy.cut()
        threading.Timer(BLIP_S, self.proxy.restore).start()
        return SendResult(SendOutcome.SENT, message_id="m1")

    async def edit(self, target: Target, message: Message) -> SendResult:
        raise AssertionError("no edits here")


@pytest.fixture
def proxied_store(pg_schema_url: str) -> Iterator[tuple[Store, TcpProxy]]:
    from ...conftest import truncate_all

    truncate_all(pg_schema_url)
    with tcp_proxy(("127.0.0.1", 5432)) as proxy:
        store = Store(pg_schema_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}", 1))
        try:
            yield store, proxy
        finally:
            store.close()


def test_a_settle_that_meets_a_blip_is_tried_again(
    proxied_store: tuple[Store, TcpProxy], clock: ManualClock
) -> None:
    store, proxy = proxied_store
    (delivery_id,) = store.outbox.enqueue(
        [
            NewDelivery(
                "k1",
                None,
                "note",
                "log",
                Target("log", "ops").as_dict(),
                Message("hello").as_dict(),
            )
        ],
        clock(),
    )
    channel = CuttingChannel(proxy)
    deliverer = Deliverer(store, {"log": channel}, clock, claimer="replica-a")

    assert asyncio.run(deliverer.deliver_due()) == 1

    assert channel.sent == [f"wk{delivery_id}"]
    settled = store.outbox.get(delivery_id)
    assert settled.status is DeliveryStatus.SENT
    assert settled.platform_message_id == "m1"
