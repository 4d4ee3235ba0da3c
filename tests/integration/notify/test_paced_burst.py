"""A burst of cards to many chats, under a platform that enforces its limits: every card goes
once, none earns a 429, chats are served side by side and each chat's cards in order."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from watchkeeper.clock import ManualClock
from watchkeeper.config import SlackConfig, TelegramConfig
from watchkeeper.notify.channels.base import ChatChannel
from watchkeeper.notify.channels.slack import SlackChannel
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.deliverer import MAX_PACE_WAIT_S, Deliverer
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.queueing import NewDelivery

from .limited import TOKEN, LimitedPlatform, limited_platform

CHATS = 12
PER_CHAT = 3
#: The platform-wide limit of this test's bot, low enough that a burst to 12 chats overruns it.
GLOBAL_RATE = 8.0
DEADLINE_S = 60.0


def cards(chats: int, per_chat: int, platform: str = "telegram") -> list[NewDelivery]:
    """``per_chat`` cards to each of ``chats`` private chats (Slack channels), chat by chat."""
    return [
        NewDelivery(
            f"burst-{chat}-{i}",
            None,
            "card",
            platform,
            Target(platform, chat_name(chat, platform)).as_dict(),
            Message(f"card {chat}.{i}").as_dict(),
        )
        for i in range(per_chat)
        for chat in range(chats)
    ]


def chat_name(chat: int, platform: str = "telegram") -> str:
    """The ``chat``-th chat's id on ``platform``."""
    return f"C{chat:04d}" if platform == "slack" else str(1000 + chat)


def deliver_all(
    store: Store,
    clock: ManualClock,
    platform: LimitedPlatform,
    stall_s: float = 0.0,
    per_chat_rate: float = 1.0,
) -> Deliverer:
    """Passes of a deliverer with the platform's real channel until nothing is pending.

    ``stall_s``: the event loop is held that long once the burst is under way, as a busy
    machine does, so every send due meanwhile wakes at once, past its slot."""
    channel: ChatChannel[Any]
    if platform.wire == "slack":
        channel = SlackChannel(
            SlackConfig(bot_token=TOKEN, base_url=platform.base_url, timeout_s=10)
        )
    else:
        channel = TelegramChannel(
            TelegramConfig(bot_token=TOKEN, base_url=platform.base_url, timeout_s=10)
        )
        channel.global_rate = GLOBAL_RATE
    channel.per_chat_rate = per_chat_rate
    deliverer = Deliverer(store, {platform.wire: channel}, clock)

    async def passes() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        if stall_s:
            loop.call_later(0.5, time.sleep, stall_s)
        try:
            while store.outbox.counts().get("pending") and loop.time() < deadline:
                await deliverer.deliver_due()
                if deliverer.next_slot_s is not None:  # nothing to claim before then
                    await deliverer.pace.sleep_until(deliverer.next_slot_s - MAX_PACE_WAIT_S)
                if not store.outbox.due(clock(), 1):
                    break  # what is left waits for a retry: the assertions below say why
        finally:
            await channel.aclose()

    asyncio.run(passes())
    return deliverer


def test_a_burst_to_many_chats_earns_no_429_and_goes_once(store: Store, clock: ManualClock) -> None:
    ids = store.outbox.enqueue(cards(CHATS, PER_CHAT), clock())
    with limited_platform(per_chat_rate=1.0, global_rate=GLOBAL_RATE) as platform:
        deliver_all(store, clock, platform)

    assert platform.refused == 0, f"{platform.refused} calls were refused with 429"
    texts = [a.text for a in platform.accepted]
    assert sorted(texts) == sorted(f"card {c}.{i}" for c in range(CHATS) for i in range(PER_CHAT))
    for delivery_id in ids:
        delivery = store.outbox.get(delivery_id)
        assert (delivery.status, delivery.attempts) == (DeliveryStatus.SENT, 1)


def test_sends_held_up_past_their_slots_do_not_bunch_into_a_429(
    store: Store, clock: ManualClock
) -> None:
    ids = store.outbox.enqueue(cards(CHATS, PER_CHAT), clock())
    with limited_platform(per_chat_rate=1.0, global_rate=GLOBAL_RATE) as platform:
        # Held for two seconds: more sends fall due meanwhile than the platform's bucket holds.
        deliver_all(store, clock, platform, stall_s=2.0)

    assert platform.refused == 0, f"refused with 429: {platform.refused_by}"
    assert sorted(a.text for a in platform.accepted) == sorted(
        f"card {c}.{i}" for c in range(CHATS) for i in range(PER_CHAT)
    )
    assert all(store.outbox.get(i).status is DeliveryStatus.SENT for i in ids)


def test_chats_are_served_together_each_in_order_and_at_its_pace(
    store: Store, clock: ManualClock
) -> None:
    store.outbox.enqueue(cards(CHATS, PER_CHAT), clock())
    # Each answer waits a little for another call: calls made together are seen together.
    with limited_platform(per_chat_rate=1.0, global_rate=None, pair_wait_s=0.5) as platform:
        deliverer = deliver_all(store, clock, platform)

    bound = deliverer.channels["telegram"].max_in_flight
    assert 1 < platform.max_in_flight <= bound, platform.max_in_flight
    assert platform.refused == 0  # the platform holds each chat to one message a second
    for chat in range(CHATS):
        seen = platform.in_chat(str(1000 + chat))
        assert [a.text for a in seen] == [f"card {chat}.{i}" for i in range(PER_CHAT)]


def test_a_group_takes_twenty_at_once_then_one_every_three_seconds(
    store: Store, clock: ManualClock
) -> None:
    group = "-100123"  # negative ids are groups: 20 messages a minute
    ids = store.outbox.enqueue(
        [
            NewDelivery(
                f"group-{i}",
                None,
                "card",
                "telegram",
                Target("telegram", group).as_dict(),
                Message(f"card {i}").as_dict(),
            )
            for i in range(23)
        ],
        clock(),
    )
    # The chat limit is raised so the group's minute is what holds the cards back.
    with limited_platform(per_chat_rate=10.0, global_rate=None, group_per_minute=20) as platform:
        deliver_all(store, clock, platform, per_chat_rate=10.0)

    assert platform.refused == 0, f"refused with 429: {platform.refused_by}"
    seen = platform.in_chat(group)
    assert [a.text for a in seen] == [f"card {i}" for i in range(23)]
    # The first twenty go as quickly as the chat allows, not one every three seconds.
    assert seen[19].at - seen[0].at < 19 * 3.0
    assert all(store.outbox.get(i).status is DeliveryStatus.SENT for i in ids)


def test_slack_channels_each_get_one_card_a_second_and_no_429(
    store: Store, clock: ManualClock
) -> None:
    ids = store.outbox.enqueue(cards(CHATS, PER_CHAT, "slack"), clock())
    # Slack's chat.postMessage: one message a second per channel, nothing platform-wide.
    with limited_platform(per_chat_rate=1.0, global_rate=None, wire="slack") as platform:
        deliver_all(store, clock, platform)

    assert platform.refused == 0, f"refused with 429: {platform.refused_by}"
    for chat in range(CHATS):
        seen = platform.in_chat(chat_name(chat, "slack"))
        assert [a.text for a in seen] == [f"card {chat}.{i}" for i in range(PER_CHAT)]
    assert all(store.outbox.get(i).status is DeliveryStatus.SENT for i in ids)


def test_a_slack_429_is_answered_as_slack_answers_it(store: Store, clock: ManualClock) -> None:
    """The limited platform's Slack wire: a second message inside the second is refused."""
    with limited_platform(per_chat_rate=1.0, global_rate=None, wire="slack") as platform:
        first = platform.answer({"channel": "C1", "text": "one"})
        second = platform.answer({"channel": "C1", "text": "two"})
    assert first[0] == 200 and first[1]["channel"] == "C1" and "ts" in first[1]
    assert second == (429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"})


def test_a_first_card_the_platform_saw_late_holds_its_chats_next_one_back(
    store: Store, clock: ManualClock
) -> None:
    """The platform judges by when it saw a message: a call that took longer than the
    quickest may have been seen that much later, so the chat's next card waits for it."""
    ids = store.outbox.enqueue(cards(4, 2, "slack"), clock())
    late = {chat_name(0, "slack"): 0.3, chat_name(2, "slack"): 0.3}
    with limited_platform(
        per_chat_rate=1.0, global_rate=None, wire="slack", first_seen_late_s=late
    ) as platform:
        deliver_all(store, clock, platform)

    assert platform.refused == 0, f"refused with 429: {platform.refused_by}"
    for chat in range(4):
        seen = platform.in_chat(chat_name(chat, "slack"))
        assert [a.text for a in seen] == [f"card {chat}.{i}" for i in range(2)]
        assert seen[1].at - seen[0].at >= 1.0 - platform.tolerance_s
    assert all(store.outbox.get(i).status is DeliveryStatus.SENT for i in ids)
