"""The Discord channel and interactions endpoint, against a fake Discord speaking its format."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.config import DiscordConfig
from watchkeeper.decide.actors import Actor
from watchkeeper.notify import cards
from watchkeeper.notify.channels.base import SendOutcome, SendResult
from watchkeeper.notify.channels.discord import DiscordChannel
from watchkeeper.notify.message import Button, Message, Target
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident

from ..decide.fixtures import acting_runtime
from ..fakes.discord import (
    APPLICATION_ID,
    LOOPBACK_TLS,
    TOKEN,
    ActionService,
    FakeDiscord,
    Signer,
    Stored,
    action_service,
    command_interaction,
    fake_discord,
    ping_interaction,
    post_interaction,
    press,
)
from ..helpers import reports_for, start, sweep
from ..server import free_port, live_server

T = TypeVar("T")
CHAT = "1400000000000000001"
ANA, BOB = "2100000000000000001", "2100000000000000002"
CARD = Message(
    "crawl c1 has stalled",
    (
        Button("Cancel", "cancel", "wk1:1:c:0123456789ab"),
        Button("Dismiss", "dismiss", "wk1:1:d:0123456789ab"),
        Button("Ask to diagnose", "diagnose", "wk1:1:g:0123456789ab"),
    ),
    "crawl c1 has stalled",
)


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with fake_discord() as fake:
        yield fake


def config(fake: FakeDiscord, **changes: Any) -> DiscordConfig:
    values: dict[str, Any] = {"bot_token": TOKEN, "application_id": APPLICATION_ID,
                              "base_url": fake.url, "timeout_s": 5.0}  # fmt: skip
    values.update(changes)
    return DiscordConfig(**values)


def with_channel(settings: DiscordConfig, use: Callable[[DiscordChannel], Awaitable[T]]) -> T:
    """Run ``use`` against a fresh channel in its own event loop; close it after."""

    async def go() -> T:
        http = httpx.AsyncClient(timeout=settings.timeout_s, verify=LOOPBACK_TLS)
        channel = DiscordChannel(settings, http)
        try:
            return await use(channel)
        finally:
            await http.aclose()

    return asyncio.run(go())


def send(settings: DiscordConfig, message: Message = CARD, key: str = "wk1") -> SendResult:
    return with_channel(settings, lambda c: c.send(Target("discord", CHAT), message, key))


# -- the channel ------------------------------------------------------------------------------


def test_a_card_is_a_message_with_action_rows_and_an_enforced_nonce(discord: FakeDiscord) -> None:
    many = Message("six buttons", tuple(Button(f"B{i}", "dismiss", f"wk1:{i}:d:0123456789ab")
                                        for i in range(6)))  # fmt: skip
    first = send(config(discord), CARD, "wk1")
    second = send(config(discord), many, "wk2-" + "x" * 40)
    assert first.outcome is SendOutcome.SENT and second.outcome is SendOutcome.SENT
    assert discord.invalid == []
    card = discord.messages[str(first.message_id)]
    assert card.channel_id == CHAT
    assert card.custom_ids == [b.data for b in CARD.buttons]
    assert [c["style"] for c in card.components[0]["components"]] == [4, 2, 2]
    create = discord.calls[0]
    assert create.body["nonce"] == "wk1" and create.body["enforce_nonce"] is True
    rows = discord.messages[str(second.message_id)].components
    assert [len(r["components"]) for r in rows] == [5, 1]
    assert discord.calls[1].body["nonce"] == ("wk2-" + "x" * 40)[:25]


def test_a_resend_with_the_same_nonce_creates_no_duplicate(discord: FakeDiscord) -> None:
    first = send(config(discord), CARD, "wk7")
    again = send(config(discord), CARD, "wk7")
    assert again.outcome is SendOutcome.SENT
    assert again.message_id == first.message_id
    assert len(discord.in_channel(CHAT)) == 1
    assert DiscordChannel.idempotent_sends is True


@pytest.mark.parametrize(
    ("fault", "outcome", "words", "retry_after"),
    [
        ("429", SendOutcome.RETRY, "rate limited", 1.5),
        ("429_global", SendOutcome.RETRY, "(global)", 1.5),
        ("403", SendOutcome.FAILED, "Missing Access (code 50001)", None),
        ("404", SendOutcome.FAILED, "Unknown Channel (code 10003)", None),
        ("500", SendOutcome.MAYBE_SENT, "HTTP 500", None),
    ],
)
def test_each_error_is_classified(
    discord: FakeDiscord,
    fault: Any,
    outcome: SendOutcome,
    words: str,
    retry_after: float | None,
) -> None:
    discord.faults.append(fault)
    result = send(config(discord))
    assert result.outcome is outcome
    assert words in (result.error or "")
    assert result.retry_after_s == retry_after
    assert discord.messages == {}


def test_a_hang_past_the_timeout_may_have_been_sent(discord: FakeDiscord) -> None:
    discord.faults.append("hang")
    result = send(config(discord, timeout_s=0.3))
    assert result.outcome is SendOutcome.MAYBE_SENT
    assert "ReadTimeout" in (result.error or "")


def test_nothing_listening_is_definitely_not_sent() -> None:
    settings = DiscordConfig(bot_token=TOKEN, base_url=f"http://127.0.0.1:{free_port()}")
    assert send(settings).outcome is SendOutcome.RETRY


def test_no_token_is_refused_without_a_call(discord: FakeDiscord) -> None:
    result = send(config(discord, bot_token=None))
    assert result.outcome is SendOutcome.FAILED
    assert "bot_token" in (result.error or "")
    assert discord.calls == []


def test_the_per_channel_rate_limit_asks_to_retry_later(discord: FakeDiscord) -> None:
    discord.per_channel_limit = 2
    results = [send(config(discord), CARD, f"wk{i}") for i in range(3)]
    assert [r.outcome for r in results] == [SendOutcome.SENT, SendOutcome.SENT, SendOutcome.RETRY]
    assert (results[2].retry_after_s or 0) > 0


def test_an_edit_replaces_the_text_and_an_empty_keyboard_removes_the_buttons(
    discord: FakeDiscord,
) -> None:
    sent = send(config(discord))
    target = Target("discord", CHAT, message_id=sent.message_id)
    done = with_channel(config(discord), lambda c: c.edit(target, Message("Decided: Cancel")))
    assert done.outcome is SendOutcome.SENT and done.message_id == sent.message_id
    card = discord.messages[str(sent.message_id)]
    assert (card.content, card.components, card.edits) == ("Decided: Cancel", [], 1)
    missing = Target("discord", CHAT, message_id="1999")
    gone = with_channel(config(discord), lambda c: c.edit(missing, Message("x")))
    assert gone.outcome is SendOutcome.FAILED and "Unknown Message" in (gone.error or "")
    assert discord.invalid == []


# -- the interactions endpoint ----------------------------------------------------------------


@pytest.fixture
def service() -> Iterator[ActionService]:
    with action_service() as started:
        yield started


@pytest.fixture
def signer() -> Signer:
    return Signer()


def chat_runtime(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    service: ActionService,
    discord: FakeDiscord,
    signer: Signer,
    **discord_changes: Any,
) -> Runtime:
    settings: dict[str, Any] = {"bot_token": TOKEN, "application_id": APPLICATION_ID,
                                "public_key": signer.public_key, "base_url": discord.url,
                                "timeout_s": 5.0}  # fmt: skip
    settings.update(discord_changes)
    return acting_runtime(
        tmp_path, store, clock, service.url,
        admins={"discord": [ANA], "slack": ["U0ANA"]}, discord=settings,
    )  # fmt: skip


@pytest.fixture
def acting(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    service: ActionService,
    discord: FakeDiscord,
    signer: Signer,
) -> Iterator[Runtime]:
    runtime = chat_runtime(tmp_path, store, clock, service, discord, signer)
    yield runtime
    runtime.sweeper.close()


def stalled(runtime: Runtime, clock: ManualClock) -> Incident:
    start(runtime, "t1", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    (live,) = runtime.store.incidents.list("live")
    return runtime.store.incidents.get(live.id)


def post_card(runtime: Runtime, discord: FakeDiscord, incident: Incident) -> Stored:
    """Send the incident's card through the channel, as the outbox would."""
    message = cards.card(incident, runtime.decider.offered(incident))
    sent = with_channel(
        runtime.settings.discord,
        lambda c: c.send(Target("discord", CHAT), message, f"wk-card-{incident.id}"),
    )
    return discord.messages[str(sent.message_id)]


def now_s(clock: ManualClock) -> int:
    return int(clock().timestamp())


def test_ping_is_answered_and_unsigned_forged_stale_or_replayed_requests_are_refused(
    acting: Runtime, clock: ManualClock, discord: FakeDiscord, signer: Signer,
    service: ActionService,
) -> None:  # fmt: skip
    incident = stalled(acting, clock)
    card = post_card(acting, discord, incident)
    with live_server(acting) as server:
        pong = post_interaction(server.url, signer, ping_interaction(), now_s(clock))
        assert (pong.status_code, pong.json()) == (200, {"type": 1})
        unsigned = post_interaction(server.url, signer, ping_interaction(), now_s(clock),
                                    headers={"Content-Type": "application/json"})  # fmt: skip
        forged = press(server.url, Signer(), card, "Cancel", ANA, "ana", now_s(clock))[0]
        stale = press(server.url, signer, card, "Cancel", ANA, "ana", now_s(clock) - 301)[0]
        signed, interaction = press(server.url, signer, card, "Dismiss", BOB, "bob", now_s(clock))
        assert signed.json() == {"type": 6}
        discord.wait_for(lambda: len(discord.followups_for(interaction["token"])) == 1)
        clock.advance(301)
        replayed = post_interaction(server.url, signer, interaction, now_s(clock) - 301)
    assert [r.status_code for r in (unsigned, forged, stale, replayed)] == [401] * 4
    assert forged.json()["error"]["code"] == "unauthorized"
    presses = acting.store.decisions.presses_for(incident.id)
    assert [(p.actor, p.outcome) for p in presses] == [("@bob", "refused")]
    assert service.paths == []


def test_a_press_is_answered_before_its_action_finishes(
    acting: Runtime, clock: ManualClock, discord: FakeDiscord, signer: Signer,
    service: ActionService,
) -> None:  # fmt: skip
    incident = stalled(acting, clock)
    card = post_card(acting, discord, incident)
    service.hold = True
    with live_server(acting) as server:
        try:
            answer, interaction = press(server.url, signer, card, "Cancel", ANA, "ana",
                                        now_s(clock))  # fmt: skip
            assert answer.status_code == 200 and answer.json() == {"type": 6}
            assert service.entered.wait(15), "the action never started"
            assert not service.release.is_set() and service.paths == []
            decided = acting.store.incidents.get(incident.id).decision
            assert decided is not None and (decided.actor, decided.via) == ("@ana", "discord")
        finally:
            service.release.set()
        service.wait_for(lambda: service.paths == ["/cancel/t1"])
    assert discord.followups_for(interaction["token"]) == []  # the winner is told by the card
    assert discord.invalid == []


def test_a_non_admin_is_refused_and_told_why_privately(
    tmp_path: Path, store: Store, clock: ManualClock, service: ActionService,
    discord: FakeDiscord, signer: Signer,
) -> None:  # fmt: skip
    # No bot token on the server: the endpoint builds its own channel for follow-ups.
    runtime = chat_runtime(tmp_path, store, clock, service, discord, signer, bot_token=None)
    try:
        incident = stalled(runtime, clock)
        card = post_card(chat_runtime(tmp_path, store, clock, service, discord, signer),
                         discord, incident)  # fmt: skip
        with live_server(runtime) as server:
            _, interaction = press(server.url, signer, card, "Cancel", BOB, "bob", now_s(clock))
            discord.wait_for(lambda: bool(discord.followups_for(interaction["token"])))
    finally:
        runtime.sweeper.close()
    (followup,) = discord.followups_for(interaction["token"])
    assert followup.application_id == APPLICATION_ID
    assert followup.body["flags"] == 64
    assert "only admins act: @bob is not an admin on Discord" in followup.body["content"]
    assert runtime.store.incidents.get(incident.id).decision is None
    assert service.paths == []
    assert discord.invalid == []


def test_a_later_press_is_told_what_was_decided_by_whom_and_where(
    acting: Runtime, clock: ManualClock, discord: FakeDiscord, signer: Signer,
    service: ActionService,
) -> None:  # fmt: skip
    incident = stalled(acting, clock)
    card = post_card(acting, discord, incident)
    ana_on_slack = Actor("@ana", "slack", is_admin=True, user_id="U0ANA")
    assert acting.decider.press(incident.id, "dismiss", incident.state_token, ana_on_slack).won
    with live_server(acting) as server:
        _, interaction = press(server.url, signer, card, "Cancel", ANA, "ana", now_s(clock))
        discord.wait_for(lambda: bool(discord.followups_for(interaction["token"])))
    (followup,) = discord.followups_for(interaction["token"])
    assert followup.body["content"] == "already decided: Dismiss by @ana on Slack at 12:01 UTC"
    assert service.paths == []


def test_a_repeated_interaction_is_acknowledged_and_ignored(
    acting: Runtime, clock: ManualClock, discord: FakeDiscord, signer: Signer,
) -> None:  # fmt: skip
    incident = stalled(acting, clock)
    card = post_card(acting, discord, incident)
    with live_server(acting) as server:
        first, interaction = press(server.url, signer, card, "Cancel", BOB, "bob", now_s(clock))
        again = post_interaction(server.url, signer, interaction, now_s(clock))
        discord.wait_for(lambda: bool(discord.followups_for(interaction["token"])))
    assert first.json() == again.json() == {"type": 6}
    assert len(discord.followups_for(interaction["token"])) == 1
    assert len(acting.store.decisions.presses_for(incident.id)) == 1


def test_runs_is_answered_in_the_interaction_response(
    acting: Runtime, clock: ManualClock, signer: Signer,
) -> None:  # fmt: skip
    stalled(acting, clock)
    with live_server(acting) as server:
        runs = post_interaction(server.url, signer, command_interaction(BOB, "bob", CHAT),
                                now_s(clock))  # fmt: skip
        every = post_interaction(
            server.url, signer, command_interaction(BOB, "bob", CHAT, all_=True), now_s(clock)
        )
    assert runs.json()["type"] == 4
    content = runs.json()["data"]["content"]
    assert "Needs attention (1)" in content and "swarm_task t1" in content
    assert "Finished in the last day" not in content
    assert "Finished in the last day" in every.json()["data"]["content"]
    assert len(content) <= 2000


# -- the round trip through the outbox --------------------------------------------------------


def test_round_trip_card_press_decision_and_edited_card(
    acting: Runtime, clock: ManualClock, discord: FakeDiscord, signer: Signer,
    service: ActionService,
) -> None:  # fmt: skip
    start(acting, "t9", "swarm_task", origin={"platform": "discord", "chat_id": CHAT})
    reports_for(acting).fail("swarm_task", "t9", "worker crashed", None, None)
    sweep(acting)

    async def deliver() -> int:
        async with httpx.AsyncClient(timeout=5, verify=LOOPBACK_TLS) as http:
            notifier = acting.build_notifier(
                {"discord": DiscordChannel(acting.settings.discord, http)}
            )
            notifier.route(clock())
            return await notifier.deliver_due()

    assert asyncio.run(deliver()) == 1
    (card,) = discord.in_channel(CHAT)
    assert card.components and "worker crashed" in card.content
    with live_server(acting) as server:
        label = "Retry (I checked its effects)"
        answer, interaction = press(server.url, signer, card, label, ANA, "ana", now_s(clock))
        assert answer.json() == {"type": 6}
        service.wait_for(lambda: service.paths == ["/retry/t9"])
    clock.advance(5)
    assert asyncio.run(deliver()) == 1
    assert card.edits == 1 and card.components == []
    assert "Decided: Retry (I checked its effects) by @ana on Discord at 12:00 UTC" in card.content
    assert discord.followups_for(interaction["token"]) == []
    assert discord.invalid == []
