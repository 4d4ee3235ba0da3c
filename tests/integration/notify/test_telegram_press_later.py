"""A Telegram press is answered at once and acted on after the answer, as Slack's and Discord's are.

The kind's action is a real HTTP endpoint on loopback that does not answer
until the test releases it. The webhook must answer 200 while the action still
hangs (else Telegram resends the update), the callback query is answered at
once, a resend of the same ``update_id`` acts on nothing, the outcome still
reaches the presser (the edited card for a win, a reply under the card
otherwise), and a clean shutdown waits for the action it had answered before.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.server.webhooks.telegram import NOT_OURS, WORKING
from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionStatus

from ...conftest import make_settings
from ...support.live_server import LiveServer, live_server
from ...support.waiting import wait_for
from ..decide.fixtures import acting_kinds
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
def actions() -> Iterator[ActionService]:
    """The kind's own action endpoint; every call hangs until the test releases it."""
    with action_service() as started:
        started.hold = True
        yield started


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, actions: ActionService, fake: FakeTelegram
) -> Iterator[Runtime]:
    """Telegram admin 42 (ana); the bot at ``fake``; actions through ``actions``, each allowed
    the longest time limit there is, as in the report (a press held for up to 300 s)."""
    kinds = acting_kinds(actions.url)
    for table in kinds.values():
        for action in table["actions"].values():
            action["timeout_s"] = 300
    telegram = {
        "bot_token": TOKEN,
        "webhook_secret": WEBHOOK_SECRET,
        "base_url": fake.url,
        "timeout_s": 5,
    }
    settings = make_settings(
        tmp_path, store.url, kinds=kinds, admins={"telegram": ["42"]}, telegram=telegram
    )
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    yield runtime
    runtime.sweeper.close()


def route_and_deliver(runtime: Runtime, clock: ManualClock) -> int:
    """What the outbox holds, routed and sent to the fake, as the server's notifier does."""

    async def go() -> int:
        notifier = runtime.build_notifier({"telegram": TelegramChannel(runtime.settings.telegram)})
        try:
            notifier.route(clock())
            return await notifier.deliver_due()
        finally:
            await notifier.aclose()

    return asyncio.run(go())


def card_of_a_failed_task(runtime: Runtime, clock: ManualClock, fake: FakeTelegram) -> Stored:
    """Task t1 failed having changed nothing outside: its card, in the topic, offers Retry."""
    start(runtime, "t1", "swarm_task", effects="none", origin=ORIGIN)
    reports_for(runtime).fail("swarm_task", "t1", "worker crashed", None, None)
    sweep(runtime)
    assert route_and_deliver(runtime, clock) == 1
    (card,) = fake.messages(CHAT)
    return card


def data_of(card: Stored, label: str) -> str:
    (data,) = [b["callback_data"] for row in card.buttons for b in row if b["text"] == label]
    return data


def query_id(update: dict[str, Any]) -> str:
    return str(update["callback_query"]["id"])


def journal(runtime: Runtime) -> list[ActionStatus]:
    (incident,) = runtime.store.incidents.list("live")
    return [a.status for a in runtime.store.decisions.actions_for_incident(incident.id)]


def pressed_in_background(server: LiveServer, update: dict[str, Any]) -> list[httpx.Response]:
    """Post ``update`` from a thread of its own; the list gets the webhook's answer."""
    answers: list[httpx.Response] = []
    threading.Thread(target=lambda: answers.append(press(server.url, update)), daemon=True).start()
    return answers


def test_the_webhook_answers_while_the_kind_hangs_and_a_resend_acts_on_nothing(
    acting: Runtime, clock: ManualClock, fake: FakeTelegram, actions: ActionService
) -> None:
    card = card_of_a_failed_task(acting, clock, fake)
    update = fake.callback_update(card, data_of(card, "Retry"), 42, "ana")
    events: list[str] = []
    with live_server(acting) as server:
        try:
            answers = pressed_in_background(server, update)
            assert actions.entered.wait(30), "the kind's action never started"
            events.append("action hangs")
            # Well inside the 30 s after which the action service answers by itself.
            wait_for(
                lambda: answers,
                what="the webhook's answer while the kind's action hangs",
                timeout=15,
            )
            events.append("webhook answered")
            fake.wait_for(lambda f: any(a.callback_query_id == query_id(update) for a in f.answers))
            events.append("callback answered")
            resent = press(server.url, update)  # Telegram resends what it thinks was lost
            events.append("resend answered")
        finally:
            events.append("action released")
            actions.release.set()
        actions.wait_for(lambda: actions.paths == ["/retry/t1"])
        wait_for(lambda: journal(acting) == [ActionStatus.DONE], what="the retry to be done")
    assert events == [
        "action hangs",
        "webhook answered",
        "callback answered",
        "resend answered",
        "action released",
    ]
    (answered,) = answers
    assert (answered.status_code, answered.json()) == (200, {"ok": True})
    assert (resent.status_code, resent.json()) == (200, {"ok": True, "duplicate": True})
    (told,) = fake.answers_to(query_id(update))
    assert (told.text, told.show_alert) == (WORKING, False)
    (incident,) = acting.store.incidents.list("live")
    assert len(acting.store.decisions.presses_for(incident.id)) == 1
    # The presser and the chat hear of the win on the card, which the outbox edits.
    assert route_and_deliver(acting, clock) == 1
    (edited,) = fake.messages(CHAT)
    assert edited.message_id == card.message_id and edited.buttons == []
    assert edited.text.endswith("Decided: Retry by @ana on Telegram at 12:00 UTC")
    assert actions.paths == ["/retry/t1"]


def test_a_press_that_does_not_win_is_told_in_a_reply_under_the_card(
    acting: Runtime, clock: ManualClock, fake: FakeTelegram, actions: ActionService
) -> None:
    card = card_of_a_failed_task(acting, clock, fake)
    stranger = fake.callback_update(card, data_of(card, "Retry"), 99, None, first_name="bob")
    foreign = fake.callback_update(card, "someone-elses-button", 42, "ana")
    with live_server(acting) as server:
        assert press(server.url, stranger).status_code == 200
        assert press(server.url, foreign).status_code == 200
        fake.wait_for(lambda f: len(f.chats.get(CHAT, [])) == 3)
    for update in (stranger, foreign):
        (told,) = fake.answers_to(query_id(update))
        assert (told.text, told.show_alert) == (WORKING, False)
    replies = fake.messages(CHAT)[1:]  # each press's reply, in whichever order they were sent
    assert sorted(r.text for r in replies) == [
        "@ana: " + NOT_OURS,
        "bob: only admins act: @bob is not an admin on Telegram",
    ]
    for reply in replies:
        assert (reply.reply_to, reply.thread_id, reply.buttons) == (card.message_id, TOPIC, [])
    assert actions.paths == []
    assert acting.store.incidents.list("live")[0].decision is None


def taking_connections(server: LiveServer) -> bool:
    port = int(server.url.rsplit(":", 1)[1])
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return False
    return True


def test_a_clean_shutdown_waits_for_the_action_of_a_press_it_answered(
    acting: Runtime, clock: ManualClock, fake: FakeTelegram, actions: ActionService
) -> None:
    card = card_of_a_failed_task(acting, clock, fake)
    update = fake.callback_update(card, data_of(card, "Retry"), 42, "ana")
    with live_server(acting) as server:
        assert server.server is not None
        try:
            answers = pressed_in_background(server, update)
            assert actions.entered.wait(30), "the kind's action never started"
            server.server.should_exit = True
            wait_for(lambda: not taking_connections(server), what="the server to begin stopping")
        finally:
            actions.release.set()
        # Leaving the block waits for the server to stop.
    wait_for(lambda: answers, what="the webhook's answer")
    assert [a.status_code for a in answers] == [200]
    assert actions.paths == ["/retry/t1"]
    assert journal(acting) == [ActionStatus.DONE]
    (told,) = fake.answers_to(query_id(update))
    assert told.text == WORKING
