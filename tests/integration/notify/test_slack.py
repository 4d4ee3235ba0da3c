"""What only Slack does: blocks in threads, bearer tokens, HMAC-signed form posts.

The scenarios Slack shares with Discord run in ``test_chat_platforms.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.base import SendOutcome
from watchkeeper.notify.channels.slack import SlackSendResult
from watchkeeper.notify.message import Button, Message, Target
from watchkeeper.runtime import Runtime

from ...support.live_server import live_server
from ..fakes.platform import ActionService
from ..fakes.slack import (
    SIGNING_SECRET,
    FakeSlack,
    block_actions,
    fake_slack,
    post_form,
    signature_headers,
)
from .chat import USERS, config, now_s, post_card, send, stalled, with_channel

CHAT = FakeSlack.CHAT
ANA = USERS["slack"]["ana"]
#: Slack escapes ``<``, ``>`` and ``&`` in the text people read.
CARD = Message(
    "crawl c1 has stalled <since 12:00> & counting",
    (
        Button("Cancel", "cancel", "wk1:1:c:0123456789ab"),
        Button("Ask to diagnose", "diagnose", "wk1:1:g:0123456789ab"),
    ),
    "crawl c1 has stalled",
)


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with fake_slack() as started:
        yield started


# -- the channel ------------------------------------------------------------------------------


def test_a_card_is_a_section_and_an_actions_block_in_the_thread(fake: FakeSlack) -> None:
    result = send(fake, CARD, target=Target("slack", CHAT, thread_id="1767614400.000001"))
    assert result.outcome is SendOutcome.SENT
    assert isinstance(result, SlackSendResult) and result.channel == CHAT
    (posted,) = fake.in_channel(CHAT)
    assert result.message_id == posted.ts
    assert posted.thread_ts == "1767614400.000001"
    assert posted.text == "crawl c1 has stalled"
    assert posted.shown == "crawl c1 has stalled &lt;since 12:00&gt; &amp; counting"
    assert [(b["action_id"], b["value"], b["text"]) for b in posted.buttons] == [
        ("wk_cancel", "wk1:1:c:0123456789ab", {"type": "plain_text", "text": "Cancel"}),
        ("wk_diagnose", "wk1:1:g:0123456789ab", {"type": "plain_text", "text": "Ask to diagnose"}),
    ]
    assert fake.invalid == []


def test_a_wrong_token_is_refused_for_good(fake: FakeSlack) -> None:
    result = send(fake, CARD, bot_token="xoxb-wrong")
    assert result.outcome is SendOutcome.FAILED and "invalid_auth" in (result.error or "")


def test_an_edit_updates_text_and_blocks_and_may_keep_the_buttons(fake: FakeSlack) -> None:
    sent = send(fake, CARD)
    target = Target("slack", CHAT, message_id=sent.message_id)
    decided = Message("Decided: Cancel by @ana", CARD.buttons[1:], "Decided")
    done = with_channel(config(fake), lambda c: c.edit(target, decided))
    assert done.outcome is SendOutcome.SENT and done.message_id == sent.message_id
    (posted,) = fake.in_channel(CHAT)
    assert (posted.text, posted.edits) == ("Decided", 1)
    assert "Decided: Cancel by @ana" in posted.shown
    assert [b["action_id"] for b in posted.buttons] == ["wk_diagnose"]
    assert fake.invalid == []


# -- the request URLs -------------------------------------------------------------------------


def test_forged_stale_and_replayed_requests_are_refused_and_change_nothing(
    acting: Runtime, clock: ManualClock, fake: FakeSlack, actions: ActionService
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, fake, incident)
    payload = block_actions(card, "Cancel", ANA, "ana", fake.response_url())
    fields = {"payload": json.dumps(payload)}
    with live_server(acting) as server:
        path = "/webhooks/slack"
        forged = post_form(server.url, path, fields, now_s(clock), secret="not-the-secret")
        unsigned = post_form(server.url, path, fields, now_s(clock), headers={})
        stale = post_form(server.url, path, fields, now_s(clock) - 301)
        body = f"payload={json.dumps(payload)}".encode()
        signed_earlier = signature_headers(SIGNING_SECRET, body, now_s(clock))
        clock.advance(301)
        replayed = post_form(server.url, path, fields, 0, headers=signed_earlier)
        slash = post_form(
            server.url,
            "/webhooks/slack/commands",
            {"command": "/runs"},
            now_s(clock),
            secret="not-the-secret",
        )
    statuses = [r.status_code for r in (forged, unsigned, stale, replayed, slash)]
    assert statuses == [401] * 5
    assert acting.store.decisions.presses_for(incident.id) == []
    assert acting.store.incidents.get(incident.id).decision is None
    assert actions.paths == [] and fake.responses == {}
