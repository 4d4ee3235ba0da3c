"""Chats are told a sentence; the details (a driver's error, a kind's answer) go to the log and
the action journal, redacted.

Two ways internals used to reach a chat: with the database away, ``/runs`` and
presses answered with the driver's text (``connection to server at
"127.0.0.1", port 50223 failed``); and a kind's answer to an action was echoed
to the presser (``Retry done: {"ok": true, ...}``) and, when a runbook took
the step, posted to the whole chat. Each is checked on Telegram, Discord and
Slack, against their local fakes, over everything our side sent them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action
from watchkeeper.notify.cards import card
from watchkeeper.notify.channels.base import SendOutcome
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.message import Target
from watchkeeper.redact import redact
from watchkeeper.runtime import Runtime
from watchkeeper.server.webhooks.telegram import WORKING
from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionStatus
from watchkeeper.store.incidents import Incident

from ...support.live_server import live_server
from ...support.tcp_proxy import TcpProxy, tcp_proxy
from ...support.waiting import wait_for
from ..decide.fixtures import acting_runtime
from ..fakes import telegram as tg
from ..fakes.discord import FakeDiscord, fake_discord
from ..fakes.slack import FakeSlack, fake_slack
from ..helpers import reports_for, start, sweep
from ..recorder import Recorder, recording_server
from .chat import now_s, table, user, with_channel
from .test_card_life import ADMINS, FAKES, Chat, deliver, origin

TELEGRAM_CHAT = -1001234567890
#: A kind's answer to a retry: an internal address, an id and a key, none of them for a chat.
BODY = json.dumps(
    {
        "ok": True,
        "retry_id": "rt-5521",
        "worker": "http://10.20.30.40:8080/jobs/rt-5521",
        "note": "requeued with key sk-proj0123456789abcdefghij",
    }
)
SECRET = "sk-proj0123456789abcdefghij"
INTERNALS = ("rt-5521", "10.20.30.40", SECRET)


def sent_to(fake: Any) -> str:
    """Everything our side sent a fake platform (messages, edits, replies, answers), as text."""
    with fake.changed:
        return json.dumps([call.body for call in fake.calls])


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


# -- the database away: /runs and a press, on each platform --------------------------------------


@pytest.fixture
def cut_off(pg_schema_url: str) -> Iterator[tuple[Store, TcpProxy]]:
    """A PostgreSQL store reached through a proxy of this test's own, which it can cut."""
    from ...conftest import truncate_all

    truncate_all(pg_schema_url)
    with tcp_proxy(("127.0.0.1", 5432)) as proxy:
        store = Store(pg_schema_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}", 1))
        try:
            yield store, proxy
        finally:
            proxy.restore()
            store.close()


@dataclass
class Chats:
    """The three platforms' fakes, at once."""

    telegram: tg.FakeTelegram
    discord: FakeDiscord
    slack: FakeSlack


@pytest.fixture
def chats() -> Iterator[Chats]:
    with tg.fake_telegram() as telegram, fake_discord() as discord, fake_slack() as slack:
        yield Chats(telegram, discord, slack)
        assert telegram.invalid == discord.invalid == slack.invalid == []


def everywhere(tmp_path: Path, store: Store, clock: ManualClock, url: str, chats: Chats) -> Runtime:
    """A runtime talking to all three fakes; ana is an admin on each."""
    telegram = {
        "bot_token": tg.TOKEN,
        "webhook_secret": tg.WEBHOOK_SECRET,
        "base_url": chats.telegram.url,
        "timeout_s": 5,
    }
    return acting_runtime(
        tmp_path,
        store,
        clock,
        url,
        admins=ADMINS,
        telegram=telegram,
        discord=table(chats.discord),
        slack=table(chats.slack),
    )


def stalled(runtime: Runtime, clock: ManualClock) -> Incident:
    """Task t1 ran past its budget, and a sweep saw it so."""
    start(runtime, "t1", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    assert sweep(runtime).ok
    (live,) = runtime.store.incidents.list("live")
    return runtime.store.incidents.get(live.id)


def telegram_card(runtime: Runtime, chats: Chats, incident: Incident) -> tg.Stored:
    message = card(incident, [Action.CANCEL, Action.DISMISS])

    async def go() -> str:
        channel = TelegramChannel(runtime.settings.telegram)
        try:
            sent = await channel.send(Target("telegram", str(TELEGRAM_CHAT)), message, "key")
        finally:
            await channel.aclose()
        assert sent.outcome is SendOutcome.SENT
        return str(sent.message_id)

    message_id = asyncio.run(go())
    return next(
        m for m in chats.telegram.messages(TELEGRAM_CHAT) if str(m.message_id) == message_id
    )


def platform_card(runtime: Runtime, fake: FakeDiscord | FakeSlack, incident: Incident) -> Any:
    message = card(incident, [Action.CANCEL, Action.DISMISS])
    settings = getattr(runtime.settings, fake.NAME)
    sent = with_channel(
        settings, lambda c: c.send(Target(fake.NAME, fake.CHAT), message, f"wk-{incident.id}")
    )
    return fake.message(str(sent.message_id))


def test_with_the_database_cut_off_chats_hear_a_sentence_and_the_log_the_driver(
    cut_off: tuple[Store, TcpProxy],
    tmp_path: Path,
    clock: ManualClock,
    chats: Chats,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, proxy = cut_off
    driver = f"port {proxy.port}"  # what the driver's error says, and no chat may
    with recording_server() as actions:
        runtime = everywhere(tmp_path, store, clock, actions.url, chats)
        try:
            incident = stalled(runtime, clock)
            cards = {
                "telegram": telegram_card(runtime, chats, incident),
                "discord": platform_card(runtime, chats.discord, incident),
                "slack": platform_card(runtime, chats.slack, incident),
            }
            with live_server(runtime) as server, caplog.at_level(logging.INFO):
                proxy.cut()
                assert not sweep(runtime).ok
                pressed = chats.telegram.callback_update(
                    cards["telegram"], cards["telegram"].callback_data[0], 42, "ana"
                )
                assert tg.press(server.url, pressed).status_code == 200
                asked = tg.press(
                    server.url, chats.telegram.command_update(TELEGRAM_CHAT, "/runs", 43)
                )
                assert asked.status_code == 200
                replies: dict[str, dict[str, Any]] = {}
                runs: dict[str, str] = {}
                for fake in (chats.discord, chats.slack):
                    ana, bob = user(fake, "ana"), user(fake, "bob")
                    _, replies[fake.NAME] = fake.press(
                        server.url, cards[fake.NAME], "Cancel", ana, "ana", now_s(clock)
                    )
                    runs[fake.NAME] = fake.runs_text(
                        fake.runs(server.url, bob, "bob", False, now_s(clock))
                    )
                wait_for(
                    lambda: all(
                        f.replies_to(replies[f.NAME]) for f in (chats.discord, chats.slack)
                    ),
                    what="the presses on Discord and Slack to be answered",
                )
            # The server has stopped, and so finished what it was telling Telegram.
        finally:
            proxy.restore()
            runtime.sweeper.close()
    card_id = cards["telegram"].message_id
    (runs["telegram"],) = [
        m.text
        for m in chats.telegram.messages(TELEGRAM_CHAT)
        if m.message_id != card_id and m.reply_to is None
    ]
    for name, fake in {
        "telegram": chats.telegram,
        "discord": chats.discord,
        "slack": chats.slack,
    }.items():
        everything = sent_to(fake) + json.dumps(runs)
        leaked = [piece for piece in (driver, "127.0.0.1") if piece in everything]
        assert not leaked, (name, everything)
    told = {
        fake.NAME: fake.replies_to(replies[fake.NAME])[0][fake.TEXT]
        for fake in (chats.discord, chats.slack)
    }
    (told["telegram"],) = [
        m.text for m in chats.telegram.messages(TELEGRAM_CHAT) if m.reply_to == card_id
    ]
    for platform in ("telegram", "discord", "slack"):
        press_answer, runs_answer = told[platform], runs[platform]
        assert press_answer.endswith(
            "Nothing was done: run supervision is not working since 2026-01-05 12:01 UTC; "
            "press again when it is back (the server's log says why)"
        ), (platform, press_answer)
        assert runs_answer.startswith(
            "Run supervision is not working since 2026-01-05 12:01 UTC; "
            "ask again when it is back (the server's log says why)\n"
        ), (platform, runs_answer)
        assert "Needs attention (1)" in runs_answer and "swarm_task t1" in runs_answer
    (working,) = chats.telegram.answers
    assert (working.text, working.show_alert) == (WORKING, False)
    # The details are the server's: its log has the driver's words for each answer.
    lines = logged(caplog)
    assert (
        sum(driver in line and "press" in line and "not decided" in line for line in lines) == 3
    ), lines
    assert (
        sum(
            driver in line and line.startswith("/runs was answered without the store")
            for line in lines
        )
        == 3
    ), lines
    assert actions.requests == []


# -- a kind's answer: kept from the chat, journalled and logged redacted --------------------------


@pytest.fixture(params=sorted(FAKES))
def chat(request: pytest.FixtureRequest) -> Iterator[Chat]:
    """Each platform's fake in turn."""
    with FAKES[request.param]() as fake:
        yield Chat(request.param, fake)
        assert fake.invalid == []


@pytest.fixture
def service() -> Iterator[Recorder]:
    """The kind's own action endpoint; each test sets what it answers."""
    with recording_server() as recorder:
        yield recorder


@pytest.fixture
def acting_with(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    service: Recorder,
    chat: Chat,
) -> Iterator[Any]:
    """Build a runtime for ``chat`` with given runbook switches; closed after the test."""
    made: list[Runtime] = []

    def build(**runbooks: bool) -> Runtime:
        runtime = acting_runtime(
            tmp_path,
            store,
            clock,
            service.url,
            admins=ADMINS,
            runbooks=runbooks,
            **{chat.name: chat.settings()},
        )
        made.append(runtime)
        return runtime

    yield build
    for runtime in made:
        runtime.sweeper.close()


def failed_task(runtime: Runtime, chat: Chat) -> None:
    """Task t1, started from ``chat``, failed having changed nothing outside: Retry is offered."""
    start(runtime, "t1", "swarm_task", effects="none", origin=origin(chat))
    reports_for(runtime).fail("swarm_task", "t1", "worker crashed", None, None)
    sweep(runtime)


def journal(runtime: Runtime) -> list[Any]:
    (incident,) = runtime.store.incidents.list()
    return runtime.store.decisions.actions_for_incident(incident.id)


@pytest.mark.parametrize("by", ["a press", "a runbook"])
def test_a_kind_s_answer_stays_out_of_the_chat_and_is_journalled_redacted(
    by: str,
    acting_with: Any,
    clock: ManualClock,
    service: Recorder,
    chat: Chat,
    caplog: pytest.LogCaptureFixture,
) -> None:
    service.body = BODY.encode()
    runtime: Runtime = acting_with(retry_failed_without_effects=by == "a runbook")
    with caplog.at_level(logging.INFO):
        failed_task(runtime, chat)
        deliver(runtime, clock, chat)
        if by == "a press":
            (posted,) = chat.posts()
            with live_server(runtime) as server:
                chat.press(server, clock, posted, "Retry")
                wait_for(
                    lambda: [a.status for a in journal(runtime)] == [ActionStatus.DONE],
                    what="the retry to be done",
                )
                if chat.name == "telegram":
                    chat.fake.wait_for(lambda f: bool(f.answers))
            deliver(runtime, clock, chat)
    assert [r.path for r in service.requests] == ["/retry/t1"]
    card_, *notes = chat.posts()
    if by == "a press":
        assert "Decided: Retry by @ana" in card_.text
        assert notes == []  # the card tells the presser and the chat; nothing else is posted
        if chat.name == "telegram":
            assert [a.text for a in chat.fake.answers] == [WORKING]
    else:
        (note,) = notes  # the runbook's step, told to the whole chat
        assert "runbook retry_failed_without_effects: Retry done" in note.text, note.text
    everything = sent_to(chat.fake)
    assert not [piece for piece in INTERNALS if piece in everything], everything
    # The details: the journal and the log keep the kind's answer, its key masked.
    (record,) = journal(runtime)
    assert record.status is ActionStatus.DONE
    assert record.answer == redact(BODY) and SECRET not in record.answer
    assert "rt-5521" in record.answer and "10.20.30.40" in record.answer
    lines = logged(caplog)
    assert [line for line in lines if "rt-5521" in line and "kind answered" in line], lines
    assert not [line for line in lines if SECRET in line]


def test_a_refusal_is_told_in_one_short_sentence_with_no_secret(
    acting_with: Any,
    clock: ManualClock,
    service: Recorder,
    chat: Chat,
) -> None:
    service.status = 500
    service.body = (
        f"upstream said no; retry with api_key={SECRET} ".encode()
        + b"and a long page of filler " * 100
    )
    runtime: Runtime = acting_with(retry_failed_without_effects=True)
    failed_task(runtime, chat)
    deliver(runtime, clock, chat)
    (record,) = journal(runtime)
    assert record.status is ActionStatus.FAILED
    _, *notes = chat.posts()
    assert notes, "the failed step is told under the card"
    for note in notes:
        assert "the kind refused it (HTTP 500 Internal Server Error): upstream said no" in note.text
        assert note.text.count("filler") < 15  # a sentence, not the page
    everything = sent_to(chat.fake)
    assert SECRET not in everything
    # The journal keeps the page (as far as it keeps answers), its key masked.
    assert SECRET not in record.answer and record.answer.count("filler") > 60
