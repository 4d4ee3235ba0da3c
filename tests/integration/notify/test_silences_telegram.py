"""Silences and acknowledgement on Telegram: the card's buttons, their presses, the edit."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.runtime import Runtime
from watchkeeper.server.webhooks.telegram import WORKING
from watchkeeper.store import Store

from ...support.live_server import live_server
from ..decide.fixtures import acting_runtime
from ..fakes.platform import ActionService, action_service
from ..fakes.telegram import TOKEN, WEBHOOK_SECRET, FakeTelegram, Stored, fake_telegram, press
from ..helpers import reports_for, start, sweep

CHAT = -1001234567890
TOPIC = 7
ORIGIN = {"platform": "telegram", "chat_id": str(CHAT), "thread_id": str(TOPIC)}


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with fake_telegram() as started:
        yield started
        assert started.invalid == [], "our channel sent something the Bot API would refuse"


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, fake: FakeTelegram
) -> Iterator[Runtime]:
    """Telegram admins 42 and 43; the bot at ``fake``."""
    with action_service() as actions:
        runtime = telegram_runtime(tmp_path, store, clock, actions, fake)
        yield runtime
        runtime.sweeper.close()


def telegram_runtime(
    tmp_path: Path, store: Store, clock: ManualClock, actions: ActionService, fake: FakeTelegram
) -> Runtime:
    telegram = {
        "bot_token": TOKEN,
        "webhook_secret": WEBHOOK_SECRET,
        "base_url": fake.url,
        "timeout_s": 5,
    }
    return acting_runtime(
        tmp_path, store, clock, actions.url, admins={"telegram": ["42", "43"]}, telegram=telegram
    )


def route_and_deliver(runtime: Runtime, clock: ManualClock) -> int:
    async def go() -> int:
        notifier = runtime.build_notifier({"telegram": TelegramChannel(runtime.settings.telegram)})
        try:
            notifier.route(clock())
            return await notifier.deliver_due()
        finally:
            await notifier.aclose()

    return asyncio.run(go())


def card_of_a_failed_task(runtime: Runtime, clock: ManualClock, fake: FakeTelegram) -> Stored:
    start(runtime, "t1", "swarm_task", effects="none", origin=ORIGIN)
    reports_for(runtime).fail("swarm_task", "t1", "worker crashed", None, None)
    sweep(runtime)
    assert route_and_deliver(runtime, clock) == 1
    (card,) = fake.messages(CHAT)
    return card


def data_of(card: Stored, label: str) -> str:
    (data,) = [b["callback_data"] for row in card.buttons for b in row if b["text"] == label]
    return data


def told(fake: FakeTelegram, card: Stored, update: dict[str, Any]) -> str:
    """What a press was told: answered at once, then in a reply under the card."""
    (answer,) = fake.answers_to(str(update["callback_query"]["id"]))
    assert (answer.text, answer.show_alert) == (WORKING, False)
    query = update["callback_query"]["from"]
    presser = f"@{query['username']}" if query.get("username") else query["first_name"]
    (reply,) = [
        m.text
        for m in fake.messages(CHAT)
        if m.reply_to == card.message_id and m.text.startswith(f"{presser}: ")
    ]
    return reply.removeprefix(f"{presser}: ")


def test_i_am_on_it_is_answered_and_the_card_says_who_is_looking(
    acting: Runtime, clock: ManualClock, fake: FakeTelegram
) -> None:
    card = card_of_a_failed_task(acting, clock, fake)
    labels = [b["text"] for row in card.buttons for b in row]
    assert labels[-2:] == ["Silence 1 h", "I am on it"]
    with live_server(acting) as server:
        update = fake.callback_update(card, data_of(card, "I am on it"), 42, "ana")
        assert press(server.url, update).status_code == 200
        fake.wait_for(lambda f: len(f.chats.get(CHAT, [])) == 2)
    assert told(fake, card, update) == "noted: you are on swarm_task t1; nothing was decided"
    assert route_and_deliver(acting, clock) == 1
    edited, _ = fake.messages(CHAT)
    assert edited.edits == 1 and edited.text.endswith("On it: @ana (Telegram) since 12:00 UTC")
    assert [b["text"] for row in edited.buttons for b in row] == labels
    assert fake.methods_called().count("editMessageText") == 1


def test_silence_1_h_is_for_admins_and_silences_that_piece_of_work(
    acting: Runtime, clock: ManualClock, fake: FakeTelegram
) -> None:
    card = card_of_a_failed_task(acting, clock, fake)
    with live_server(acting) as server:
        stranger = fake.callback_update(
            card, data_of(card, "Silence 1 h"), 99, None, first_name="bob"
        )
        admin = fake.callback_update(card, data_of(card, "Silence 1 h"), 43, "carla")
        assert press(server.url, stranger).status_code == 200
        assert press(server.url, admin).status_code == 200
        fake.wait_for(lambda f: len(f.chats.get(CHAT, [])) == 3)
    assert told(fake, card, stranger) == "only admins act: @bob is not an admin on Telegram"
    assert told(fake, card, admin).startswith("silenced swarm_task t1 for 1 h (silence ")
    (made,) = acting.silences.list(active=True)
    assert (made.kind, made.run_id, made.created_by) == ("swarm_task", "t1", "@carla")
    # The incident is still open and still listed; nothing more is posted about it.
    (live,) = acting.store.incidents.list("live")
    assert live.decision is None
    assert route_and_deliver(acting, clock) == 0
    assert len(fake.messages(CHAT)) == 3  # the card and the two replies
