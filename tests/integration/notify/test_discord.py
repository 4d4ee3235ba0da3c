"""What only Discord does: action rows, enforced nonces, Ed25519 signatures, follow-ups.

The scenarios Discord shares with Slack run in ``test_chat_platforms.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.base import SendOutcome
from watchkeeper.notify.channels.discord import DiscordChannel
from watchkeeper.notify.message import Button, Message, Target
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...support.live_server import live_server
from ..fakes.discord import (
    APPLICATION_ID,
    FakeDiscord,
    Signer,
    fake_discord,
    ping_interaction,
    post_interaction,
    press,
)
from ..fakes.platform import ActionService
from .chat import CARD, USERS, chat_runtime, config, now_s, post_card, send, stalled, with_channel

CHAT = FakeDiscord.CHAT
ANA, BOB = USERS["discord"]["ana"], USERS["discord"]["bob"]


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    with fake_discord() as started:
        yield started


# -- the channel ------------------------------------------------------------------------------


def test_a_card_is_a_message_with_action_rows_and_an_enforced_nonce(fake: FakeDiscord) -> None:
    many = Message(
        "six buttons",
        tuple(Button(f"B{i}", "dismiss", f"wk1:{i}:d:0123456789ab") for i in range(6)),
    )
    first = send(fake, CARD, "wk1")
    second = send(fake, many, "wk2-" + "x" * 40)
    assert first.outcome is SendOutcome.SENT and second.outcome is SendOutcome.SENT
    assert fake.invalid == []
    card = fake.messages[str(first.message_id)]
    assert card.channel_id == CHAT
    assert card.custom_ids == [b.data for b in CARD.buttons]
    assert [c["style"] for c in card.components[0]["components"]] == [4, 2, 2]
    create = fake.calls[0]
    assert create.body["nonce"] == "wk1" and create.body["enforce_nonce"] is True
    rows = fake.messages[str(second.message_id)].components
    assert [len(r["components"]) for r in rows] == [5, 1]
    assert fake.calls[1].body["nonce"] == ("wk2-" + "x" * 40)[:25]


def test_a_resend_with_the_same_nonce_creates_no_duplicate(fake: FakeDiscord) -> None:
    first = send(fake, CARD, "wk7")
    again = send(fake, CARD, "wk7")
    assert again.outcome is SendOutcome.SENT
    assert again.message_id == first.message_id
    assert len(fake.in_channel(CHAT)) == 1
    assert DiscordChannel.idempotent_sends is True


def test_no_token_is_refused_without_a_call(fake: FakeDiscord) -> None:
    result = send(fake, bot_token=None)
    assert result.outcome is SendOutcome.FAILED
    assert "bot_token" in (result.error or "")
    assert fake.calls == []


def test_an_edit_replaces_the_text_and_an_empty_keyboard_removes_the_buttons(
    fake: FakeDiscord,
) -> None:
    sent = send(fake)
    target = Target("discord", CHAT, message_id=sent.message_id)
    done = with_channel(config(fake), lambda c: c.edit(target, Message("Decided: Cancel")))
    assert done.outcome is SendOutcome.SENT and done.message_id == sent.message_id
    card = fake.messages[str(sent.message_id)]
    assert (card.content, card.components, card.edits) == ("Decided: Cancel", [], 1)
    assert fake.invalid == []


# -- the interactions endpoint ----------------------------------------------------------------


def test_ping_is_answered_and_unsigned_forged_stale_or_replayed_requests_are_refused(
    acting: Runtime, clock: ManualClock, fake: FakeDiscord, actions: ActionService
) -> None:
    signer = fake.signer
    incident = stalled(acting, clock)
    card = post_card(acting, fake, incident)
    with live_server(acting) as server:
        pong = post_interaction(server.url, signer, ping_interaction(), now_s(clock))
        assert (pong.status_code, pong.json()) == (200, {"type": 1})
        unsigned = post_interaction(
            server.url,
            signer,
            ping_interaction(),
            now_s(clock),
            headers={"Content-Type": "application/json"},
        )
        forged = press(server.url, Signer(), card, "Cancel", ANA, "ana", now_s(clock))[0]
        stale = press(server.url, signer, card, "Cancel", ANA, "ana", now_s(clock) - 301)[0]
        signed, interaction = press(server.url, signer, card, "Dismiss", BOB, "bob", now_s(clock))
        assert signed.json() == {"type": 6}
        fake.wait_for(lambda: len(fake.followups_for(interaction["token"])) == 1)
        clock.advance(301)
        replayed = post_interaction(server.url, signer, interaction, now_s(clock) - 301)
    assert [r.status_code for r in (unsigned, forged, stale, replayed)] == [401] * 4
    assert forged.json()["error"]["code"] == "unauthorized"
    presses = acting.store.decisions.presses_for(incident.id)
    assert [(p.actor, p.outcome) for p in presses] == [("@bob", "refused")]
    assert actions.paths == []


def test_without_a_bot_token_the_endpoint_still_follows_up_as_the_application(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    actions: ActionService,
    fake: FakeDiscord,
    acting: Runtime,
) -> None:
    # No bot token on the server: the endpoint builds its own channel for follow-ups.
    runtime = chat_runtime(tmp_path, store, clock, actions.url, fake, bot_token=None)
    try:
        incident = stalled(runtime, clock)
        card = post_card(acting, fake, incident)
        with live_server(runtime) as server:
            _, interaction = press(
                server.url, fake.signer, card, "Cancel", BOB, "bob", now_s(clock)
            )
            fake.wait_for(lambda: bool(fake.followups_for(interaction["token"])))
    finally:
        runtime.sweeper.close()
    (followup,) = fake.followups_for(interaction["token"])
    assert followup.application_id == APPLICATION_ID
    assert followup.body["flags"] == 64
    assert "only admins act: @bob is not an admin on Discord" in followup.body["content"]
    assert runtime.store.incidents.get(incident.id).decision is None
    assert actions.paths == []
    assert fake.invalid == []
