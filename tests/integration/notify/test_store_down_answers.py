"""With watchkeeper's own store away, chats still get an answer: to a press and to ``/runs``.

The store goes away for real (the SQLite folder is moved, the PostgreSQL
database refuses connections). A press on any platform is acknowledged as the
platform expects, never with a 500, and the presser is told supervision is
not working since when and to press again; ``/runs`` says the same and lists
what the last good check saw.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action
from watchkeeper.notify.cards import card
from watchkeeper.notify.channels.base import SendOutcome
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.message import Target
from watchkeeper.runtime import Runtime
from watchkeeper.server.webhooks.telegram import WORKING
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident

from ...support.live_server import live_server
from ..decide.fixtures import acting_runtime
from ..fakes.discord import fake_discord
from ..fakes.platform import ActionService, FakePlatform, action_service
from ..fakes.slack import fake_slack
from ..fakes.telegram import TOKEN, WEBHOOK_SECRET, FakeTelegram, Stored, fake_telegram, press
from ..helpers import start, sweep
from ..test_supervision_down import Outage, outage_store  # noqa: F401 - a fixture
from .chat import chat_runtime, now_s, user, with_channel

FAKES: dict[str, Callable[[], AbstractContextManager[FakePlatform]]] = {
    "discord": fake_discord,
    "slack": fake_slack,
}
CHAT = -1001234567890
#: The buttons a stalled swarm task's card offered before the store went away.
OFFERED = [Action.CANCEL, Action.RETRY_CHECKED, Action.DISMISS, Action.DIAGNOSE]
#: The first sweep that failed: two minutes after the start, one after the stall.
DOWN_SINCE = "2026-01-05 12:02 UTC"


@pytest.fixture
def away(outage_store: tuple[Store, Outage]) -> tuple[Store, Outage]:  # noqa: F811 - the fixture
    """A store on each database, and the outage that takes it away."""
    return outage_store


@pytest.fixture(params=sorted(FAKES))
def fake(request: pytest.FixtureRequest) -> Iterator[FakePlatform]:
    with FAKES[request.param]() as started:
        yield started


@pytest.fixture
def actions() -> Iterator[ActionService]:
    with action_service() as started:
        yield started


def stalled_then_down(
    runtime: Runtime, clock: ManualClock, store: Store, outage: Outage
) -> Incident:
    """t1 stalls and is seen so; then the store goes away and a sweep fails."""
    start(runtime, "t1", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    assert sweep(runtime).ok
    (live,) = runtime.store.incidents.list("live")
    incident = runtime.store.incidents.get(live.id)
    clock.advance(59)
    outage.begin(store)
    assert not sweep(runtime).ok
    clock.advance(90)
    return incident


def assert_down_answer(text: str, again: str) -> None:
    lead = "Nothing was done: run" if again == "press" else "Run"
    said = (
        f"{lead} supervision is not working since {DOWN_SINCE}; "
        f"{again} again when it is back (the server's log says why)"
    )
    assert text.startswith(said), text


def test_a_press_and_runs_on_discord_and_slack_are_answered(
    away: tuple[Store, Outage],
    tmp_path: Path,
    clock: ManualClock,
    actions: ActionService,
    fake: FakePlatform,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, outage = away
    runtime = chat_runtime(tmp_path, store, clock, actions.url, fake)
    try:
        with live_server(runtime) as server:
            incident = stalled_then_down(runtime, clock, store, outage)
            card_ = _card_on(runtime, fake, incident)
            with caplog.at_level(logging.WARNING):
                answer, payload = fake.press(
                    server.url, card_, "Cancel", user(fake, "ana"), "ana", now_s(clock)
                )
                fake.wait_for(lambda: bool(fake.replies_to(payload)))
            runs = fake.runs(server.url, user(fake, "bob"), "bob", False, now_s(clock))
        assert fake.answer(answer) == fake.ACK
        (reply,) = fake.replies_to(payload)
        assert reply.items() >= fake.PRIVATE.items()
        assert_down_answer(reply[fake.TEXT], "press")
        assert any(
            "press" in r.getMessage() and "not decided" in r.getMessage() for r in caplog.records
        )
        assert actions.paths == []
        text = fake.runs_text(runs)
        assert_down_answer(text, "ask")
        assert "As of the last good check at 2026-01-05 12:01 UTC:" in text
        assert "Needs attention (1)" in text and "swarm_task t1" in text
        assert len(text) <= fake.MAX_TEXT
    finally:
        outage.end()
        runtime.sweeper.close()


def _card_on(runtime: Runtime, fake: FakePlatform, incident: Incident) -> Any:
    """The incident's card in the fake's conversation, posted before the store went away."""
    message = card(incident, OFFERED)
    settings = getattr(runtime.settings, fake.NAME)
    sent = with_channel(
        settings, lambda c: c.send(Target(fake.NAME, fake.CHAT), message, f"wk-{incident.id}")
    )
    return fake.message(str(sent.message_id))


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with fake_telegram() as started:
        yield started


def test_a_telegram_press_and_runs_are_answered(
    away: tuple[Store, Outage],
    tmp_path: Path,
    clock: ManualClock,
    actions: ActionService,
    telegram: FakeTelegram,
) -> None:
    store, outage = away
    config = {
        "bot_token": TOKEN,
        "webhook_secret": WEBHOOK_SECRET,
        "base_url": telegram.url,
        "timeout_s": 5,
    }
    runtime = acting_runtime(
        tmp_path, store, clock, actions.url, admins={"telegram": ["42"]}, telegram=config
    )
    try:
        with live_server(runtime) as server:
            incident = stalled_then_down(runtime, clock, store, outage)
            sent = _telegram_card(runtime, telegram, incident)
            cancel = next(d for d in sent.callback_data if d.split(":")[2] == "c")
            update = telegram.callback_update(sent, cancel, 42, "ana")
            pressed = press(server.url, update)
            again = press(server.url, update)  # Telegram resends what it thinks was lost
            runs = press(server.url, telegram.command_update(CHAT, "/runs", 43))
            telegram.wait_for(lambda f: len(f.chats.get(CHAT, [])) == 3)
        assert (pressed.status_code, again.status_code, runs.status_code) == (200, 200, 200)
        (answer,) = telegram.answers_to(str(update["callback_query"]["id"]))
        assert answer.text == WORKING  # at once; the outcome follows under the card
        (reply,) = [m.text for m in telegram.messages(CHAT) if m.reply_to == sent.message_id]
        assert reply.startswith("@ana: ")
        assert_down_answer(reply.removeprefix("@ana: "), "press")
        told = [
            m.text
            for m in telegram.messages(CHAT)
            if m.message_id != sent.message_id and m.reply_to is None
        ]
        (runs_text,) = told
        assert_down_answer(runs_text, "ask")
        assert "swarm_task t1" in runs_text
        assert actions.paths == []
    finally:
        outage.end()
        runtime.sweeper.close()


def _telegram_card(runtime: Runtime, telegram: FakeTelegram, incident: Incident) -> Stored:
    message = card(incident, OFFERED)

    async def go() -> str:
        channel = TelegramChannel(runtime.settings.telegram)
        try:
            result = await channel.send(Target("telegram", str(CHAT)), message, "key")
        finally:
            await channel.aclose()
        assert result.outcome is SendOutcome.SENT
        return str(result.message_id)

    message_id = asyncio.run(go())
    return next(m for m in telegram.messages(CHAT) if str(m.message_id) == message_id)
