"""Telegram end to end against a local fake of the Bot API that speaks its wire format.

Every request our channel sends is validated by the fake against aiogram's
models of the Bot API (``fake.invalid`` stays empty), and every update posted
to our webhook is built from aiogram's types.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from tests.support.waiting import TIMEOUT_S
from watchkeeper.clock import ManualClock
from watchkeeper.config import TelegramConfig
from watchkeeper.notify.cards import card
from watchkeeper.notify.channels.base import SendOutcome, SendResult
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.message import Button, Message, Target, button_data
from watchkeeper.runtime import Runtime
from watchkeeper.server.webhooks.telegram import NOT_OURS, WORKING
from watchkeeper.server.webhooks.telegram import router as telegram_router
from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionStatus
from watchkeeper.store.incidents import Incident

from ...support.live_server import LiveServer, free_port, live_server
from ...support.waiting import wait_for, wait_for_async
from ..decide.fixtures import acting_runtime
from ..fakes.telegram import (
    BLOCKED,
    CHAT_NOT_FOUND,
    TOKEN,
    WEBHOOK_SECRET,
    FakeTelegram,
    Stored,
    fake_telegram,
    press,
)
from ..helpers import reports_for, start, sweep
from ..recorder import Recorder, recording_server

T = TypeVar("T")
CHAT = -1001234567890
TOPIC = 7
ORIGIN = {"platform": "telegram", "chat_id": str(CHAT), "thread_id": str(TOPIC)}


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with fake_telegram() as started:
        yield started
        assert started.invalid == [], "our channel sent something the Bot API would refuse"


def telegram_config(fake: FakeTelegram, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "bot_token": TOKEN,
        "webhook_secret": WEBHOOK_SECRET,
        "base_url": fake.url,
        "timeout_s": 5,
    }
    values.update(overrides)
    return values


def with_channel(
    fake: FakeTelegram, use: Callable[[TelegramChannel], Awaitable[T]], **overrides: Any
) -> T:
    """Run ``use`` against a channel pointed at the fake, then close it."""

    async def go() -> T:
        channel = TelegramChannel(TelegramConfig(**telegram_config(fake, **overrides)))
        try:
            return await use(channel)
        finally:
            await channel.aclose()

    return asyncio.run(go())


def a_card(buttons: int = 3) -> Message:
    return Message(
        "Nightly crawl has stalled\ncrawl c1 · stalled since 2026-01-05 12:00 UTC\nno progress",
        tuple(
            Button(label, action, button_data(9, action, "tok"))
            for label, action in [
                ("Cancel", "cancel"),
                ("Dismiss", "dismiss"),
                ("Diagnose", "diagnose"),
            ][:buttons]
        ),
    )


def send_card(
    fake: FakeTelegram, target: Target, message: Message | None = None, **overrides: Any
) -> SendResult:
    return with_channel(fake, lambda c: c.send(target, message or a_card(), "key"), **overrides)


# -- the channel: sends, edits, and how each failure is classified -----------------------


def test_a_card_goes_to_its_forum_topic_with_its_buttons(fake: FakeTelegram) -> None:
    result = send_card(fake, Target("telegram", str(CHAT), str(TOPIC)))
    assert result.outcome is SendOutcome.SENT
    (stored,) = fake.messages(CHAT)
    assert result.message_id == str(stored.message_id)
    assert stored.thread_id == TOPIC
    assert fake.calls[0].body["message_thread_id"] == TOPIC
    assert [[b["text"] for b in row] for row in stored.buttons] == [
        ["Cancel", "Dismiss", "Diagnose"]
    ]
    assert stored.callback_data == [
        button_data(9, a, "tok") for a in ("cancel", "dismiss", "diagnose")
    ]


def test_a_chat_without_topics_gets_no_thread_id(fake: FakeTelegram) -> None:
    assert send_card(fake, Target("telegram", "5550001")).outcome is SendOutcome.SENT
    assert "message_thread_id" not in fake.calls[0].body
    assert fake.messages(5550001)[0].thread_id is None


def test_button_data_over_64_bytes_is_refused_before_sending(fake: FakeTelegram) -> None:
    message = Message("card", (Button("Retry", "retry", "wk1:" + "x" * 61),))
    result = send_card(fake, Target("telegram", str(CHAT)), message)
    assert result.outcome is SendOutcome.FAILED
    assert result.error is not None and "65 bytes" in result.error and "64" in result.error
    assert fake.calls == []


@pytest.mark.parametrize(
    ("code", "description", "outcome"),
    [
        (403, BLOCKED, SendOutcome.FAILED),
        (400, CHAT_NOT_FOUND, SendOutcome.FAILED),
        (500, "Internal Server Error", SendOutcome.MAYBE_SENT),
        (502, "Bad Gateway", SendOutcome.MAYBE_SENT),
    ],
)
def test_bot_api_errors_are_classified(
    fake: FakeTelegram, code: int, description: str, outcome: SendOutcome
) -> None:
    fake.fail_next("sendMessage", code, description)
    result = send_card(fake, Target("telegram", str(CHAT)))
    assert result.outcome is outcome
    assert result.error == f"Telegram {code}: {description}"
    assert result.retry_after_s is None


def test_a_blocked_bot_and_a_missing_chat_fail_for_good(fake: FakeTelegram) -> None:
    fake.blocked.add(111)
    fake.missing.add(222)
    blocked = send_card(fake, Target("telegram", "111"))
    missing = send_card(fake, Target("telegram", "222"))
    assert (blocked.outcome, blocked.error) == (SendOutcome.FAILED, f"Telegram 403: {BLOCKED}")
    assert (missing.outcome, missing.error) == (
        SendOutcome.FAILED,
        f"Telegram 400: {CHAT_NOT_FOUND}",
    )


def test_429_retries_after_telegrams_retry_after(fake: FakeTelegram) -> None:
    fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 17", retry_after=17)
    result = send_card(fake, Target("telegram", str(CHAT)))
    assert (result.outcome, result.retry_after_s) == (SendOutcome.RETRY, 17.0)
    assert fake.messages(CHAT) == []


def test_the_per_chat_flood_limit_is_a_retry_for_that_chat_only(fake: FakeTelegram) -> None:
    fake.rate_limit(per_chat=1, retry_after=5)

    async def burst(channel: TelegramChannel) -> list[SendResult]:
        return [
            await channel.send(Target("telegram", str(CHAT)), a_card(), "k1"),
            await channel.send(Target("telegram", str(CHAT)), a_card(), "k2"),
            await channel.send(Target("telegram", "5550001"), a_card(), "k3"),
        ]

    first, second, other_chat = with_channel(fake, burst)
    assert first.outcome is SendOutcome.SENT
    assert (second.outcome, second.retry_after_s) == (SendOutcome.RETRY, 5.0)
    assert other_chat.outcome is SendOutcome.SENT
    assert len(fake.messages(CHAT)) == 1


def test_a_hang_is_a_read_timeout_and_may_have_been_sent(fake: FakeTelegram) -> None:
    fake.hang_next("sendMessage")
    result = send_card(fake, Target("telegram", str(CHAT)), timeout_s=0.5)
    assert result.outcome is SendOutcome.MAYBE_SENT
    assert result.error is not None and "ReadTimeout" in result.error
    assert TOKEN not in result.error
    # Telegram did post it: sending it again would have doubled the card.
    assert len(fake.messages(CHAT)) == 1
    fake.release()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_nobody_listening_is_a_retry(fake: FakeTelegram) -> None:
    result = with_channel(
        fake,
        lambda c: c.send(Target("telegram", str(CHAT)), a_card(), "k"),
        base_url=closed_port(),
    )
    assert result.outcome is SendOutcome.RETRY
    assert result.error is not None and "ConnectError" in result.error


def test_a_wrong_token_fails_without_showing_the_token(fake: FakeTelegram) -> None:
    result = with_channel(
        fake,
        lambda c: c.send(Target("telegram", str(CHAT)), a_card(), "k"),
        bot_token="999:not-the-token",
    )
    assert (result.outcome, result.error) == (SendOutcome.FAILED, "Telegram 401: Unauthorized")


def test_an_edit_removes_the_buttons_and_is_safe_to_repeat(fake: FakeTelegram) -> None:
    sent = send_card(fake, Target("telegram", str(CHAT), str(TOPIC)))
    target = Target("telegram", str(CHAT), str(TOPIC), sent.message_id)
    decided = Message("Nightly crawl has stalled\nDecided: Cancel by @ana on Telegram at 12:00 UTC")

    async def twice(channel: TelegramChannel) -> list[SendResult]:
        return [await channel.edit(target, decided), await channel.edit(target, decided)]

    first, again = with_channel(fake, twice)
    assert (first.outcome, first.message_id) == (SendOutcome.SENT, sent.message_id)
    # The second edit changes nothing: Telegram says "message is not modified"; that is done.
    assert (again.outcome, again.message_id) == (SendOutcome.SENT, sent.message_id)
    assert [c.status for c in fake.calls if c.method == "editMessageText"] == [200, 400]
    (stored,) = fake.messages(CHAT)
    assert stored.text == decided.text and stored.buttons == [] and stored.edits == 1
    assert fake.calls[-1].body["reply_markup"] == {"inline_keyboard": []}


def test_edit_failures_are_classified_too(fake: FakeTelegram) -> None:
    sent = send_card(fake, Target("telegram", str(CHAT)))
    target = Target("telegram", str(CHAT), None, sent.message_id)
    fake.fail_next("editMessageText", 429, "Too Many Requests: retry after 3", retry_after=3)
    fake.fail_next("editMessageText", 500, "Internal Server Error")
    gone = Target("telegram", str(CHAT), None, "9999")

    async def edits(channel: TelegramChannel) -> list[SendResult]:
        return [
            await channel.edit(target, Message("x")),
            await channel.edit(target, Message("x")),
            await channel.edit(gone, Message("x")),
            await channel.edit(Target("telegram", str(CHAT)), Message("x")),
        ]

    limited, unknown, missing, no_id = with_channel(fake, edits)
    assert (limited.outcome, limited.retry_after_s) == (SendOutcome.RETRY, 3.0)
    assert unknown.outcome is SendOutcome.MAYBE_SENT
    assert (missing.outcome, missing.error) == (
        SendOutcome.FAILED,
        "Telegram 400: Bad Request: message to edit not found",
    )
    assert no_id.outcome is SendOutcome.FAILED
    assert fake.methods_called().count("editMessageText") == 3


def test_long_runs_answers_are_cut_to_4096_characters(fake: FakeTelegram) -> None:
    result = with_channel(fake, lambda c: c.send_text(str(CHAT), "line\n" * 2000, str(TOPIC)))
    assert result.outcome is SendOutcome.SENT
    (stored,) = fake.messages(CHAT)
    assert len(stored.text) == 4096 and stored.text.endswith("…")
    assert stored.thread_id == TOPIC


# -- the webhook: presses and /runs ---------------------------------------------------------


@pytest.fixture(scope="module")
def _service_server() -> Iterator[Recorder]:
    with recording_server() as recorder:
        yield recorder


@pytest.fixture
def service(_service_server: Recorder) -> Recorder:
    """The owning system's action endpoint (shared by the module's tests, emptied for each)."""
    with _service_server.lock:
        _service_server.requests.clear()
    return _service_server


def telegram_runtime(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    service: Recorder,
    fake: FakeTelegram,
    **telegram: Any,
) -> Runtime:
    """Push kinds acting through ``service``; Telegram admins 42 and 43; the bot at ``fake``."""
    return acting_runtime(
        tmp_path,
        store,
        clock,
        service.url,
        admins={"telegram": ["42", "43"]},
        telegram=telegram_config(fake, **telegram),
    )


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder, fake: FakeTelegram
) -> Iterator[Runtime]:
    runtime = telegram_runtime(tmp_path, store, clock, service, fake)
    yield runtime
    runtime.sweeper.close()


@pytest.fixture
def sqlite_store(tmp_path: Path, sqlite_template: Path) -> Iterator[Store]:
    """For tests of the HTTP surface alone, which prove nothing more on a second database."""
    target = tmp_path / "data" / "watchkeeper.db"
    target.parent.mkdir()
    shutil.copy(sqlite_template, target)
    opened = Store(f"sqlite:///{target}")
    yield opened
    opened.close()


@pytest.fixture
def server(acting: Runtime) -> Iterator[LiveServer]:
    with live_server(acting) as running:
        yield running


def failed_task(runtime: Runtime, run_id: str = "t1") -> Incident:
    """A failed swarm task, started from the topic, that changed nothing outside: Retry."""
    start(runtime, run_id, "swarm_task", effects="none", origin=ORIGIN)
    reports_for(runtime).fail("swarm_task", run_id, "worker crashed", None, None)
    sweep(runtime)
    (live,) = runtime.store.incidents.list("live")
    return runtime.store.incidents.get(live.id)


def posted_card(runtime: Runtime, fake: FakeTelegram, incident: Incident) -> Stored:
    """The incident's card, posted to the topic by our channel."""
    message = card(incident, runtime.decider.offered(incident))
    sent = send_card(fake, Target("telegram", str(CHAT), str(TOPIC)), message)
    assert sent.outcome is SendOutcome.SENT
    return next(m for m in fake.messages(CHAT) if str(m.message_id) == sent.message_id)


def retry_data(stored: Stored) -> str:
    (data,) = [d for d in stored.callback_data if d.split(":")[2] == "r"]
    return data


def query_id(update: dict[str, Any]) -> str:
    return str(update["callback_query"]["id"])


def assert_each_answered_once(fake: FakeTelegram, updates: list[dict[str, Any]]) -> None:
    # A press is answered after the webhook's 200, once it is carried out.
    fake.wait_for(lambda f: len(f.answers) >= len(updates))
    answered = [a.callback_query_id for a in fake.answers]
    assert sorted(answered) == sorted(query_id(u) for u in updates)


def settled(runtime: Runtime, incident: Incident) -> None:
    """Wait for the press posted last to decide ``incident`` and carry its action out."""

    def done() -> bool:
        journal = runtime.store.decisions.actions_for_incident(incident.id)
        return bool(journal) and journal[-1].status is not ActionStatus.STARTED

    wait_for(done, what="the press to be decided and its action carried out")


def replies(fake: FakeTelegram, stored: Stored, count: int) -> list[str]:
    """The ``count`` replies under ``stored`` (presses that did not win), sorted."""
    fake.wait_for(lambda f: len([m for m in f.chats.get(CHAT, []) if m.reply_to]) >= count)
    found = [m for m in fake.messages(CHAT) if m.reply_to == stored.message_id]
    assert all(m.thread_id == TOPIC and m.buttons == [] for m in found)
    return sorted(m.text for m in found)


def test_forged_or_missing_secrets_are_refused_and_change_nothing(
    server: LiveServer, acting: Runtime, fake: FakeTelegram, service: Recorder
) -> None:
    incident = failed_task(acting)
    stored = posted_card(acting, fake, incident)
    update = fake.callback_update(stored, retry_data(stored), 42, "ana")
    for secret in (None, "not-the-secret", WEBHOOK_SECRET + "x", ""):
        refused = press(server.url, update, secret=secret)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
    assert fake.answers == []
    assert service.requests == []
    assert acting.store.decisions.presses_for(incident.id) == []
    assert acting.store.incidents.get(incident.id).decision is None
    # Not even the update id was used up: the real delivery is still handled.
    assert press(server.url, update).status_code == 200
    settled(acting, incident)
    assert acting.store.incidents.get(incident.id).decision is not None
    assert_each_answered_once(fake, [update])


def test_an_admins_press_decides_is_answered_once_and_a_resend_does_nothing(
    server: LiveServer, acting: Runtime, fake: FakeTelegram, service: Recorder
) -> None:
    incident = failed_task(acting)
    stored = posted_card(acting, fake, incident)
    update = fake.callback_update(stored, retry_data(stored), 42, "ana")
    response = press(server.url, update)
    assert (response.status_code, response.json()) == (200, {"ok": True})
    settled(acting, incident)
    assert [r.path for r in service.requests] == ["/retry/t1"]
    decided = acting.store.incidents.get(incident.id)
    assert decided.decision is not None
    assert (decided.decision.action, decided.decision.actor, decided.decision.via) == (
        "retry",
        "@ana",
        "telegram",
    )
    assert_each_answered_once(fake, [update])
    (answer,) = fake.answers_to(query_id(update))
    assert (answer.text, answer.show_alert) == (WORKING, False)
    # The card itself is the outbox's to edit, from the decision's event.
    assert fake.methods_called().count("editMessageText") == 0
    # Telegram delivers the same update again (it did not see our answer in time).
    again = press(server.url, update)
    assert (again.status_code, again.json()) == (200, {"ok": True, "duplicate": True})
    assert len(fake.answers_to(query_id(update))) == 1
    assert len(acting.store.decisions.presses_for(incident.id)) == 1
    assert len(service.requests) == 1


def test_presses_that_cannot_act_are_answered_with_why(
    server: LiveServer, acting: Runtime, fake: FakeTelegram, service: Recorder
) -> None:
    incident = failed_task(acting)
    stored = posted_card(acting, fake, incident)
    stranger = fake.callback_update(stored, retry_data(stored), 99, None, first_name="bob")
    foreign = fake.callback_update(stored, "someone-elses-button", 42, "ana")
    gone = fake.callback_update(stored, button_data(4040, "retry", "t"), 42, "ana")
    for update in (stranger, foreign, gone):
        assert press(server.url, update).status_code == 200
    # Each is answered at once, then told why in a reply under the card.
    assert replies(fake, stored, 3) == [f"@ana: {NOT_OURS}"] * 2 + [
        "bob: only admins act: @bob is not an admin on Telegram"
    ]
    assert {(a.text, a.show_alert) for a in fake.answers} == {(WORKING, False)}
    assert service.requests == []
    assert acting.store.incidents.get(incident.id).decision is None
    assert_each_answered_once(fake, [stranger, foreign, gone])


def test_a_second_admin_is_told_who_decided_where_and_when(
    server: LiveServer, acting: Runtime, fake: FakeTelegram, service: Recorder
) -> None:
    incident = failed_task(acting)
    stored = posted_card(acting, fake, incident)
    first = fake.callback_update(stored, retry_data(stored), 42, "ana")
    second = fake.callback_update(stored, retry_data(stored), 43, "carla")
    press(server.url, first)
    settled(acting, incident)
    press(server.url, second)
    assert replies(fake, stored, 1) == [
        "@carla: already decided: Retry by @ana on Telegram at 12:00 UTC"
    ]
    assert len(service.requests) == 1
    assert_each_answered_once(fake, [first, second])


def test_presses_at_once_decide_once_and_each_is_answered_once(
    server: LiveServer, acting: Runtime, fake: FakeTelegram, service: Recorder
) -> None:
    incident = failed_task(acting)
    stored = posted_card(acting, fake, incident)
    updates = [
        fake.callback_update(stored, retry_data(stored), 42 + i % 2, f"admin{i}") for i in range(6)
    ]
    go = threading.Barrier(len(updates))
    statuses: list[int] = []

    def send(update: dict[str, Any]) -> None:
        go.wait(timeout=20)
        statuses.append(press(server.url, update).status_code)

    threads = [threading.Thread(target=send, args=(u,)) for u in updates]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert statuses == [200] * len(updates)
    assert_each_answered_once(fake, updates)
    assert {a.text for a in fake.answers} == {WORKING}
    # The winner is told by the card; every other press in a reply under it.
    texts = [t.split(": ", 1)[1] for t in replies(fake, stored, len(updates) - 1)]
    assert [t.split(":")[0] for t in texts] == ["already decided"] * (len(updates) - 1)
    settled(acting, incident)
    assert len(service.requests) == 1


def test_runs_is_answered_in_the_same_topic(
    server: LiveServer, acting: Runtime, fake: FakeTelegram
) -> None:
    failed_task(acting)
    start(acting, "busy", "crawl")
    for text in ("/runs", "/runs@watchkeeper_test_bot all", "/runs@another_bot", "hello"):
        assert press(server.url, fake.command_update(CHAT, text, 43, TOPIC)).status_code == 200
    plain, everything = fake.messages(CHAT)
    assert plain.thread_id == TOPIC and everything.thread_id == TOPIC
    assert plain.text.startswith("Needs attention (1)")
    assert "swarm_task t1" in plain.text and "crawl busy" in plain.text
    assert "Finished in the last day" not in plain.text
    assert "Finished in the last day" in everything.text
    # The failed task's incident is pressed from here too: a keyboard row of its buttons.
    assert [b["text"].split()[0] for row in plain.buttons for b in row] == ["#1"] * len(
        plain.callback_data
    )
    assert plain.callback_data and fake.answers == []
    # In a chat without topics the answer has no thread either.
    press(server.url, fake.command_update(5550001, "/runs", 43))
    (answer,) = fake.messages(5550001)
    assert answer.thread_id is None
    assert "message_thread_id" not in fake.calls[-1].body


def test_the_round_trip_card_press_decided_card(
    server: LiveServer, acting: Runtime, clock: ManualClock, fake: FakeTelegram, service: Recorder
) -> None:
    """A failed run from a topic: the card arrives there, a press decides, the card is edited."""
    notifier = acting.build_notifier({"telegram": TelegramChannel(acting.settings.telegram)})

    async def scenario() -> tuple[Stored, dict[str, Any]]:
        start(acting, "t1", "swarm_task", effects="none", origin=ORIGIN)
        reports_for(acting).fail("swarm_task", "t1", "worker crashed", None, None)
        await acting.sweeper.sweep()
        assert notifier.route(clock()) == 1
        assert await notifier.deliver_due() == 1
        (sent,) = fake.messages(CHAT)
        update = fake.callback_update(sent, retry_data(sent), 42, "ana")
        assert (await asyncio.to_thread(press, server.url, update)).status_code == 200
        await wait_for_async(lambda: len(fake.answers) == 1 and len(service.requests) == 1)
        await asyncio.to_thread(settled, acting, acting.store.incidents.list("live")[0])
        assert notifier.route(clock()) == 1
        assert await notifier.deliver_due() == 1
        await notifier.aclose()
        return sent, update

    sent, update = asyncio.run(scenario())
    assert sent.thread_id == TOPIC
    (edited,) = fake.messages(CHAT)
    assert edited.message_id == sent.message_id and edited.edits == 1
    assert edited.buttons == []
    assert "swarm_task t1" in edited.text
    assert edited.text.endswith("Decided: Retry by @ana on Telegram at 12:00 UTC")
    assert fake.methods_called() == ["sendMessage", "answerCallbackQuery", "editMessageText"]
    assert [a.text for a in fake.answers_to(query_id(update))] == [WORKING]
    assert [r.path for r in service.requests] == ["/retry/t1"]
    (card_row, edit_row) = acting.store.outbox.for_incident(
        acting.store.incidents.list("live")[0].id
    )
    assert (card_row.purpose, card_row.status.value) == ("card", "sent")
    assert card_row.platform_message_id == str(sent.message_id)
    assert (edit_row.purpose, edit_row.status.value) == ("update", "sent")


# -- the HTTP surface alone (one database) ---------------------------------------------------


@pytest.fixture
def surface(
    tmp_path: Path, sqlite_store: Store, clock: ManualClock, service: Recorder, fake: FakeTelegram
) -> Iterator[Runtime]:
    runtime = telegram_runtime(tmp_path, sqlite_store, clock, service, fake)
    yield runtime
    runtime.sweeper.close()


def test_bodies_that_are_not_updates_are_bad_requests(surface: Runtime) -> None:
    headers = {"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET}
    with (
        live_server(surface) as running,
        httpx.Client(base_url=running.url, headers=headers, timeout=TIMEOUT_S) as client,
    ):
        broken = client.post("/webhooks/telegram", content=b"{not json")
        shapeless = client.post("/webhooks/telegram", json={"message": {"text": "/runs"}})
    assert (broken.status_code, broken.json()["error"]["code"]) == (400, "malformed_json")
    assert shapeless.status_code == 400
    assert "update_id" in shapeless.json()["error"]["message"]


def test_without_a_secret_the_endpoint_is_not_there(
    tmp_path: Path, sqlite_store: Store, clock: ManualClock, service: Recorder, fake: FakeTelegram
) -> None:
    runtime = telegram_runtime(tmp_path, sqlite_store, clock, service, fake, webhook_secret=None)
    try:
        with live_server(runtime) as running:
            response = press(running.url, fake.command_update(CHAT, "/runs", 42))
        assert response.status_code == 404
        assert response.json()["error"]["message"] == "telegram is not configured"
        assert fake.calls == []
    finally:
        runtime.sweeper.close()


def test_without_a_notifier_the_route_builds_its_own_channel_and_closes_it(
    surface: Runtime, fake: FakeTelegram
) -> None:
    app = FastAPI()
    app.state.services = surface
    app.include_router(telegram_router)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        started = threading.Event()
        while not server.started and thread.is_alive():
            started.wait(0.01)
        update = fake.command_update(CHAT, "/runs", 43, TOPIC)
        assert press(f"http://127.0.0.1:{port}", update).status_code == 200
        own = app.state.telegram_channel
        assert isinstance(own, TelegramChannel)
        session = own._session
        assert session is not None
    finally:
        server.should_exit = True
        thread.join(timeout=20)
    assert app.state.telegram_channel is None
    assert session.closed
    assert fake.messages(CHAT)[0].text.startswith("Needs attention")
