"""What Discord and Slack must both do, run against each platform's fake in turn.

Each fake keeps its platform's wire format, signatures and quirks; the
scenarios here read them through the verbs of
:class:`~tests.integration.fakes.platform.FakePlatform`. What only one
platform does stays in ``test_discord.py`` or ``test_slack.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.decide.actors import Actor
from watchkeeper.notify.channels.base import SendOutcome
from watchkeeper.notify.message import Message, Target
from watchkeeper.runtime import Runtime

from ...support.live_server import free_port, live_server
from ..fakes.discord import fake_discord
from ..fakes.platform import ActionService, FakePlatform
from ..fakes.slack import fake_slack
from .chat import CARD, config, deliver, failed, now_s, post_card, send, stalled, user, with_channel

FAKES: dict[str, Callable[[], AbstractContextManager[FakePlatform]]] = {
    "discord": fake_discord,
    "slack": fake_slack,
}


@pytest.fixture(params=sorted(FAKES))
def fake(request: pytest.FixtureRequest) -> Iterator[FakePlatform]:
    """Each platform's fake in turn (a test may pick one with indirect parametrisation)."""
    with FAKES[request.param]() as started:
        yield started


# -- the channel ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fake", "fault", "outcome", "words", "retry_after"),
    [
        ("discord", "429", SendOutcome.RETRY, "rate limited", 1.5),
        ("discord", "429_global", SendOutcome.RETRY, "(global)", 1.5),
        ("discord", "403", SendOutcome.FAILED, "Missing Access (code 50001)", None),
        ("discord", "404", SendOutcome.FAILED, "Unknown Channel (code 10003)", None),
        ("discord", "500", SendOutcome.MAYBE_SENT, "HTTP 500", None),
        ("slack", "channel_not_found", SendOutcome.FAILED, "channel_not_found", None),
        ("slack", "429", SendOutcome.RETRY, "HTTP 429", 3.0),
        ("slack", "ratelimited", SendOutcome.RETRY, "ratelimited", None),
        ("slack", "500", SendOutcome.MAYBE_SENT, "HTTP 500", None),
    ],
    indirect=["fake"],
)
def test_each_error_is_classified(
    fake: FakePlatform, fault: str, outcome: SendOutcome, words: str, retry_after: float | None
) -> None:
    fake.faults.append(fault)
    result = send(fake)
    assert result.outcome is outcome
    assert words in (result.error or "")
    assert result.retry_after_s == retry_after
    assert fake.stored() == []


def test_a_hang_past_the_timeout_may_have_been_sent(fake: FakePlatform) -> None:
    fake.faults.append("hang")
    result = send(fake, timeout_s=0.3)
    assert result.outcome is SendOutcome.MAYBE_SENT
    assert "ReadTimeout" in (result.error or "")


def test_nothing_listening_is_definitely_not_sent(fake: FakePlatform) -> None:
    assert send(fake, base_url=f"http://127.0.0.1:{free_port()}").outcome is SendOutcome.RETRY


@pytest.mark.parametrize(
    ("fake", "retry_after"),
    # Discord says how long until its window has room; Slack sends its own Retry-After.
    [("discord", None), ("slack", 3.0)],
    indirect=["fake"],
)
def test_the_per_channel_rate_limit_asks_to_retry_later(
    fake: FakePlatform, retry_after: float | None
) -> None:
    fake.per_channel_limit = 2
    results = [send(fake, CARD, f"wk{i}") for i in range(3)]
    assert [r.outcome for r in results] == [SendOutcome.SENT, SendOutcome.SENT, SendOutcome.RETRY]
    assert (results[2].retry_after_s or 0) > 0
    assert retry_after is None or results[2].retry_after_s == retry_after


@pytest.mark.parametrize(
    ("fake", "message_id", "words"),
    [("discord", "1999", "Unknown Message"), ("slack", "1.000000", "message_not_found")],
    indirect=["fake"],
)
def test_an_edit_of_a_message_that_is_gone_fails_for_good(
    fake: FakePlatform, message_id: str, words: str
) -> None:
    send(fake)
    gone = Target(fake.NAME, fake.CHAT, message_id=message_id)
    missing = with_channel(config(fake), lambda c: c.edit(gone, Message("Decided: Cancel")))
    assert missing.outcome is SendOutcome.FAILED and words in (missing.error or "")
    assert fake.invalid == []


# -- presses and commands ---------------------------------------------------------------------


def test_a_press_is_answered_before_its_action_finishes(
    acting: Runtime, clock: ManualClock, fake: FakePlatform, actions: ActionService
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, fake, incident)
    actions.hold = True
    with live_server(acting) as server:
        try:
            answer, payload = fake.press(
                server.url, card, "Cancel", user(fake, "ana"), "ana", now_s(clock)
            )
            assert fake.answer(answer) == fake.ACK
            assert actions.entered.wait(15), "the action never started"
            assert not actions.release.is_set() and actions.paths == []
            decided = acting.store.incidents.get(incident.id).decision
            assert decided is not None and (decided.actor, decided.via) == ("@ana", fake.NAME)
        finally:
            actions.release.set()
        actions.wait_for(lambda: actions.paths == ["/cancel/t1"])
    assert fake.replies_to(payload) == []  # the winner is told by the edited card
    assert fake.invalid == []


def test_a_non_admin_is_refused_and_told_why_privately(
    acting: Runtime, clock: ManualClock, fake: FakePlatform, actions: ActionService
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, fake, incident)
    with live_server(acting) as server:
        _, payload = fake.press(server.url, card, "Cancel", user(fake, "bob"), "bob", now_s(clock))
        fake.wait_for(lambda: bool(fake.replies_to(payload)))
    (reply,) = fake.replies_to(payload)
    assert reply.items() >= fake.PRIVATE.items()
    assert reply[fake.TEXT].startswith(f"only admins act: @bob is not an admin on {fake.TITLE}")
    assert acting.store.incidents.get(incident.id).decision is None
    assert actions.paths == [] and fake.invalid == []


def test_a_later_press_is_told_who_decided_where_and_diagnosis_answers_the_presser(
    acting: Runtime, clock: ManualClock, fake: FakePlatform, actions: ActionService
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, fake, incident)
    ana_on_slack = Actor("@ana", "slack", is_admin=True, user_id=user(fake, "ana"))
    assert acting.decider.press(incident.id, "dismiss", incident.state_token, ana_on_slack).won
    with live_server(acting) as server:
        _, late = fake.press(server.url, card, "Cancel", user(fake, "cleo"), "cleo", now_s(clock))
        _, asked = fake.press(
            server.url, card, "Ask to diagnose", user(fake, "bob"), "bob", now_s(clock)
        )
        fake.wait_for(lambda: bool(fake.replies_to(late)) and bool(fake.replies_to(asked)))
    (told,) = fake.replies_to(late)
    assert told[fake.TEXT] == "already decided: Dismiss by @ana on Slack at 12:01 UTC"
    diagnosis = fake.replies_to(asked)[0]
    assert diagnosis.items() >= fake.PRIVATE.items() and diagnosis[fake.TEXT]
    assert actions.paths == []


def test_a_repeated_press_is_acknowledged_and_ignored(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    incident = stalled(acting, clock)
    card = post_card(acting, fake, incident)
    with live_server(acting) as server:
        first, payload = fake.press(
            server.url, card, "Cancel", user(fake, "bob"), "bob", now_s(clock)
        )
        again = fake.repeat(server.url, payload, now_s(clock))
        fake.wait_for(lambda: bool(fake.replies_to(payload)))
    assert fake.answer(first) == fake.answer(again) == fake.ACK
    assert len(fake.replies_to(payload)) == 1
    assert len(acting.store.decisions.presses_for(incident.id)) == 1


def test_runs_is_answered_in_the_response(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    stalled(acting, clock)
    with live_server(acting) as server:
        runs = fake.runs(server.url, user(fake, "bob"), "bob", False, now_s(clock))
        every = fake.runs(server.url, user(fake, "bob"), "bob", True, now_s(clock))
    assert runs.items() >= fake.RUNS.items()
    text = fake.runs_text(runs)
    assert "Needs attention (1)" in text and "swarm_task t1" in text
    assert "Finished in the last day" not in text
    assert "Finished in the last day" in fake.runs_text(every)
    assert len(text) <= fake.MAX_TEXT


# -- the round trip through the outbox --------------------------------------------------------


def test_round_trip_card_press_decision_and_edited_card(
    acting: Runtime, clock: ManualClock, fake: FakePlatform, actions: ActionService
) -> None:
    failed(acting, fake)
    assert deliver(acting, clock, fake) == 1
    (card,) = fake.in_channel(fake.CHAT)
    labels = card.labels
    assert "Retry (I checked its effects)" in labels and "worker crashed" in card.shown
    label = "Retry (I checked its effects)"
    with live_server(acting) as server:
        answer, won = fake.press(server.url, card, label, user(fake, "ana"), "ana", now_s(clock))
        assert fake.answer(answer) == fake.ACK
        actions.wait_for(lambda: actions.paths == ["/retry/t9"])
    clock.advance(5)
    assert deliver(acting, clock, fake) == 1
    assert card.edits == 1
    decided = f"Decided: Retry (I checked its effects) by @ana on {fake.TITLE} at 12:00 UTC"
    assert decided in card.shown
    # Discord's decided card drops its buttons; Slack's keeps them for a later press to find.
    assert card.labels == (labels if fake.KEEPS_BUTTONS else [])
    if fake.KEEPS_BUTTONS:
        late = _press_late(acting, clock, fake, card)
        assert late[0][fake.TEXT].startswith(
            f"already decided: Retry (I checked its effects) by @ana on {fake.TITLE} at 12:00 UTC"
        )
    assert fake.replies_to(won) == [] and fake.invalid == []


def _press_late(
    acting: Runtime, clock: ManualClock, fake: FakePlatform, card: Any
) -> list[dict[str, Any]]:
    """Cleo presses Dismiss on the decided card; the replies she got."""
    with live_server(acting) as server:
        _, late = fake.press(server.url, card, "Dismiss", user(fake, "cleo"), "cleo", now_s(clock))
        fake.wait_for(lambda: bool(fake.replies_to(late)))
    return fake.replies_to(late)
