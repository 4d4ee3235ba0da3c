"""The Slack channel and request URLs, against a fake Slack speaking its format."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.config import SlackConfig
from watchkeeper.decide.actors import Actor
from watchkeeper.notify import cards
from watchkeeper.notify.channels.base import SendOutcome, SendResult
from watchkeeper.notify.channels.slack import SlackChannel, SlackSendResult
from watchkeeper.notify.message import Button, Message, Target
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident

from ..decide.fixtures import acting_runtime
from ..fakes.discord import ActionService, action_service
from ..fakes.slack import (
    LOOPBACK_TLS,
    SIGNING_SECRET,
    TOKEN,
    FakeSlack,
    Posted,
    block_actions,
    command,
    fake_slack,
    post_form,
    press,
    signature_headers,
)
from ..helpers import reports_for, start, sweep
from ..server import free_port, live_server

T = TypeVar("T")
CHAT = "C0ALERTS"
ANA, BOB, CLEO = "U0ANA", "U0BOB", "U0CLEO"
CARD = Message(
    "crawl c1 has stalled <since 12:00> & counting",
    (
        Button("Cancel", "cancel", "wk1:1:c:0123456789ab"),
        Button("Ask to diagnose", "diagnose", "wk1:1:g:0123456789ab"),
    ),
    "crawl c1 has stalled",
)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack() as fake:
        yield fake


def config(fake: FakeSlack, **changes: Any) -> SlackConfig:
    values: dict[str, Any] = {"bot_token": TOKEN, "signing_secret": SIGNING_SECRET,
                              "base_url": fake.url, "timeout_s": 5.0}  # fmt: skip
    values.update(changes)
    return SlackConfig(**values)


def with_channel(settings: SlackConfig, use: Callable[[SlackChannel], Awaitable[T]]) -> T:
    """Run ``use`` against a fresh channel in its own event loop; close it after."""

    async def go() -> T:
        http = httpx.AsyncClient(timeout=settings.timeout_s, verify=LOOPBACK_TLS)
        channel = SlackChannel(settings, http)
        try:
            return await use(channel)
        finally:
            await http.aclose()

    return asyncio.run(go())


def send(settings: SlackConfig, target: Target | None = None) -> SendResult:
    place = target or Target("slack", CHAT)
    return with_channel(settings, lambda c: c.send(place, CARD, "wk1"))


# -- the channel ------------------------------------------------------------------------------


def test_a_card_is_a_section_and_an_actions_block_in_the_thread(slack: FakeSlack) -> None:
    result = send(config(slack), Target("slack", CHAT, thread_id="1767614400.000001"))
    assert result.outcome is SendOutcome.SENT
    assert isinstance(result, SlackSendResult) and result.channel == CHAT
    (posted,) = slack.in_channel(CHAT)
    assert result.message_id == posted.ts
    assert posted.thread_ts == "1767614400.000001"
    assert posted.text == "crawl c1 has stalled"
    assert posted.shown == "crawl c1 has stalled &lt;since 12:00&gt; &amp; counting"
    assert [(b["action_id"], b["value"], b["text"]) for b in posted.buttons] == [
        ("wk_cancel", "wk1:1:c:0123456789ab", {"type": "plain_text", "text": "Cancel"}),
        ("wk_diagnose", "wk1:1:g:0123456789ab", {"type": "plain_text", "text": "Ask to diagnose"}),
    ]
    assert slack.invalid == []


@pytest.mark.parametrize(
    ("fault", "outcome", "words", "retry_after"),
    [
        ("channel_not_found", SendOutcome.FAILED, "channel_not_found", None),
        ("429", SendOutcome.RETRY, "HTTP 429", 3.0),
        ("ratelimited", SendOutcome.RETRY, "ratelimited", None),
        ("500", SendOutcome.MAYBE_SENT, "HTTP 500", None),
    ],
)
def test_each_error_is_classified(
    slack: FakeSlack, fault: Any, outcome: SendOutcome, words: str, retry_after: float | None
) -> None:
    slack.faults.append(fault)
    result = send(config(slack))
    assert result.outcome is outcome
    assert words in (result.error or "")
    assert result.retry_after_s == retry_after
    assert slack.messages == []


def test_a_hang_past_the_timeout_may_have_been_sent(slack: FakeSlack) -> None:
    slack.faults.append("hang")
    result = send(config(slack, timeout_s=0.3))
    assert result.outcome is SendOutcome.MAYBE_SENT
    assert "ReadTimeout" in (result.error or "")


def test_nothing_listening_is_definitely_not_sent() -> None:
    settings = SlackConfig(bot_token=TOKEN, base_url=f"http://127.0.0.1:{free_port()}")
    assert send(settings).outcome is SendOutcome.RETRY


def test_a_wrong_token_is_refused_for_good(slack: FakeSlack) -> None:
    result = send(config(slack, bot_token="xoxb-wrong"))
    assert result.outcome is SendOutcome.FAILED and "invalid_auth" in (result.error or "")


def test_the_per_channel_rate_limit_asks_to_retry_later(slack: FakeSlack) -> None:
    slack.per_channel_limit = 2
    results = [send(config(slack)) for _ in range(3)]
    assert [r.outcome for r in results] == [SendOutcome.SENT, SendOutcome.SENT, SendOutcome.RETRY]
    assert results[2].retry_after_s == 3.0


def test_an_edit_updates_text_and_blocks_and_may_keep_the_buttons(slack: FakeSlack) -> None:
    sent = send(config(slack))
    target = Target("slack", CHAT, message_id=sent.message_id)
    decided = Message("Decided: Cancel by @ana", CARD.buttons[1:], "Decided")
    done = with_channel(config(slack), lambda c: c.edit(target, decided))
    assert done.outcome is SendOutcome.SENT and done.message_id == sent.message_id
    (posted,) = slack.in_channel(CHAT)
    assert (posted.text, posted.edits) == ("Decided", 1)
    assert "Decided: Cancel by @ana" in posted.shown
    assert [b["action_id"] for b in posted.buttons] == ["wk_diagnose"]
    gone = Target("slack", CHAT, message_id="1.000000")
    missing = with_channel(config(slack), lambda c: c.edit(gone, decided))
    assert missing.outcome is SendOutcome.FAILED and "message_not_found" in (missing.error or "")
    assert slack.invalid == []


# -- the request URLs -------------------------------------------------------------------------


@pytest.fixture
def service() -> Iterator[ActionService]:
    with action_service() as started:
        yield started


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, service: ActionService, slack: FakeSlack
) -> Iterator[Runtime]:
    runtime = acting_runtime(
        tmp_path, store, clock, service.url,
        admins={"slack": [ANA, CLEO], "discord": ["2100000000000000001"]},
        slack={"bot_token": TOKEN, "signing_secret": SIGNING_SECRET, "base_url": slack.url,
               "timeout_s": 5.0},
    )  # fmt: skip
    yield runtime
    runtime.sweeper.close()


def stalled(runtime: Runtime, clock: ManualClock) -> Incident:
    start(runtime, "t1", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    (live,) = runtime.store.incidents.list("live")
    return runtime.store.incidents.get(live.id)


def post_card(runtime: Runtime, slack: FakeSlack, incident: Incident) -> Posted:
    """Send the incident's card through the channel, as the outbox would."""
    message = cards.card(incident, runtime.decider.offered(incident))
    sent = with_channel(
        runtime.settings.slack, lambda c: c.send(Target("slack", CHAT), message, "wk")
    )
    return next(m for m in slack.messages if m.ts == sent.message_id)


def now_s(clock: ManualClock) -> int:
    return int(clock().timestamp())


def answers(slack: FakeSlack, payload: dict[str, Any]) -> list[dict[str, Any]]:
    path = payload["response_url"].removeprefix(slack.url)
    return slack.responses.get(path, [])


def test_forged_stale_and_replayed_requests_are_refused_and_change_nothing(
    acting: Runtime, clock: ManualClock, slack: FakeSlack, service: ActionService
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, slack, incident)
    payload = block_actions(card, "Cancel", ANA, "ana", slack.response_url())
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
        slash = post_form(server.url, "/webhooks/slack/commands", {"command": "/runs"},
                          now_s(clock), secret="not-the-secret")  # fmt: skip
    statuses = [r.status_code for r in (forged, unsigned, stale, replayed, slash)]
    assert statuses == [401] * 5
    assert acting.store.decisions.presses_for(incident.id) == []
    assert acting.store.incidents.get(incident.id).decision is None
    assert service.paths == [] and slack.responses == {}


def test_a_press_is_answered_before_its_action_finishes(
    acting: Runtime, clock: ManualClock, slack: FakeSlack, service: ActionService
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, slack, incident)
    service.hold = True
    with live_server(acting) as server:
        try:
            answer, payload = press(server.url, slack, card, "Cancel", ANA, "ana", now_s(clock))
            assert (answer.status_code, answer.content) == (200, b"")
            assert service.entered.wait(15), "the action never started"
            assert not service.release.is_set() and service.paths == []
            decided = acting.store.incidents.get(incident.id).decision
            assert decided is not None and (decided.actor, decided.via) == ("@ana", "slack")
        finally:
            service.release.set()
        service.wait_for(lambda: service.paths == ["/cancel/t1"])
    assert answers(slack, payload) == []  # the winner is told by the edited card
    assert slack.invalid == []


def test_a_non_admin_is_refused_and_told_why_privately(
    acting: Runtime, clock: ManualClock, slack: FakeSlack, service: ActionService
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, slack, incident)
    with live_server(acting) as server:
        _, payload = press(server.url, slack, card, "Cancel", BOB, "bob", now_s(clock))
        slack.wait_for(lambda: bool(answers(slack, payload)))
    (reply,) = answers(slack, payload)
    assert reply["response_type"] == "ephemeral" and reply["replace_original"] is False
    assert reply["text"].startswith("only admins act: @bob is not an admin on Slack")
    assert acting.store.incidents.get(incident.id).decision is None
    assert service.paths == [] and slack.invalid == []


def test_a_later_press_is_told_who_decided_and_diagnosis_answers_the_presser(
    acting: Runtime, clock: ManualClock, slack: FakeSlack, service: ActionService
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, slack, incident)
    ana = Actor("@ana", "slack", is_admin=True, user_id=ANA)
    assert acting.decider.press(incident.id, "dismiss", incident.state_token, ana).won
    with live_server(acting) as server:
        _, late = press(server.url, slack, card, "Cancel", CLEO, "cleo", now_s(clock))
        _, asked = press(server.url, slack, card, "Ask to diagnose", BOB, "bob", now_s(clock))
        slack.wait_for(lambda: bool(answers(slack, late)) and bool(answers(slack, asked)))
    assert (
        answers(slack, late)[0]["text"] == "already decided: Dismiss by @ana on Slack at 12:01 UTC"
    )
    diagnosis = answers(slack, asked)[0]
    assert diagnosis["response_type"] == "ephemeral" and diagnosis["text"]
    assert service.paths == []


def test_a_repeated_press_is_acknowledged_and_ignored(
    acting: Runtime, clock: ManualClock, slack: FakeSlack
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, slack, incident)
    payload = block_actions(card, "Cancel", BOB, "bob", slack.response_url())
    fields = {"payload": json.dumps(payload)}
    with live_server(acting) as server:
        first = post_form(server.url, "/webhooks/slack", fields, now_s(clock))
        again = post_form(server.url, "/webhooks/slack", fields, now_s(clock))
        slack.wait_for(lambda: bool(answers(slack, payload)))
    assert first.status_code == again.status_code == 200
    assert len(answers(slack, payload)) == 1
    assert len(acting.store.decisions.presses_for(incident.id)) == 1


def test_runs_is_answered_in_the_http_response(acting: Runtime, clock: ManualClock) -> None:
    stalled(acting, clock)
    with live_server(acting) as server:
        runs = command(server.url, "", BOB, now_s(clock))
        every = command(server.url, "all", BOB, now_s(clock))
    assert runs.json()["response_type"] == "ephemeral"
    assert "Needs attention (1)" in runs.json()["text"]
    assert "swarm_task t1" in runs.json()["text"]
    assert "Finished in the last day" in every.json()["text"]


# -- the round trip through the outbox --------------------------------------------------------


def test_round_trip_card_press_decision_and_card_keeps_its_buttons(
    acting: Runtime, clock: ManualClock, slack: FakeSlack, service: ActionService
) -> None:
    start(acting, "t9", "swarm_task", origin={"platform": "slack", "chat_id": CHAT})
    reports_for(acting).fail("swarm_task", "t9", "worker crashed", None, None)
    sweep(acting)

    async def deliver() -> int:
        async with httpx.AsyncClient(timeout=5, verify=LOOPBACK_TLS) as http:
            notifier = acting.build_notifier({"slack": SlackChannel(acting.settings.slack, http)})
            notifier.route(clock())
            return await notifier.deliver_due()

    assert asyncio.run(deliver()) == 1
    (card,) = slack.in_channel(CHAT)
    labels = [b["text"]["text"] for b in card.buttons]
    assert "Retry (I checked its effects)" in labels and "worker crashed" in card.shown
    with live_server(acting) as server:
        label = "Retry (I checked its effects)"
        _, won = press(server.url, slack, card, label, ANA, "ana", now_s(clock))
        service.wait_for(lambda: service.paths == ["/retry/t9"])
    clock.advance(5)
    assert asyncio.run(deliver()) == 1
    assert card.edits == 1
    assert "Decided: Retry (I checked its effects) by @ana on Slack at 12:00 UTC" in card.shown
    assert [b["text"]["text"] for b in card.buttons] == labels
    with live_server(acting) as server:
        _, late = press(server.url, slack, card, "Dismiss", CLEO, "cleo", now_s(clock))
        slack.wait_for(lambda: bool(answers(slack, late)))
    assert answers(slack, late)[0]["text"].startswith(
        "already decided: Retry (I checked its effects) by @ana on Slack at 12:00 UTC"
    )
    assert answers(slack, won) == [] and slack.invalid == []
