"""Ask to diagnose describes the work as it is now and recommends only the buttons offered now."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action
from watchkeeper.decide.offer import LABELS
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident, IncidentStatus

from ...support.live_server import live_server
from ..fakes.discord import fake_discord
from ..fakes.platform import ActionService, FakePlatform, action_service
from ..fakes.slack import fake_slack
from ..helpers import reports_for, start, sweep
from ..notify.chat import chat_runtime, now_s, post_card, user

FAKES: dict[str, Callable[[], AbstractContextManager[FakePlatform]]] = {
    "discord": fake_discord,
    "slack": fake_slack,
}
#: Every deciding button's words, to find any the diagnosis names. A supervised program's
#: Restart and Stop are offered for programs only, and "stop" is also the diagnosis's verb for
#: what to do in the work's own system.
DECIDING_LABELS = {
    a: w for a, w in LABELS.items() if a not in (Action.DIAGNOSE, Action.RESTART, Action.STOP)
}


@pytest.fixture(params=sorted(FAKES))
def fake(request: pytest.FixtureRequest) -> Iterator[FakePlatform]:
    with FAKES[request.param]() as started:
        yield started


@pytest.fixture
def actions() -> Iterator[ActionService]:
    with action_service() as started:
        yield started


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, actions: ActionService, fake: FakePlatform
) -> Iterator[Runtime]:
    runtime = chat_runtime(tmp_path, store, clock, actions.url, fake)
    yield runtime
    runtime.sweeper.close()


def diagnosed(runtime: Runtime, clock: ManualClock, fake: FakePlatform, card: Any) -> str:
    """Press "Ask to diagnose" on ``card`` as bob; the words he was answered with."""
    with live_server(runtime) as server:
        _, asked = fake.press(
            server.url, card, "Ask to diagnose", user(fake, "bob"), "bob", now_s(clock)
        )
        fake.wait_for(lambda: bool(fake.replies_to(asked)))
    (reply,) = fake.replies_to(asked)
    text: str = reply[fake.TEXT]
    return text


def named_buttons(text: str) -> set[Action]:
    """The deciding buttons ``text`` names, by their words or by their verbs."""
    lowered = text.lower()
    named = {a for a, words in DECIDING_LABELS.items() if words.lower() in lowered}
    verbs = {Action.CANCEL: "cancel", Action.DISMISS: "dismiss", Action.CLOSE_TURN: "close the"}
    named |= {a for a, verb in verbs.items() if verb in lowered}
    if "retry" in lowered:
        named.add(Action.RETRY)
    return named


def stalled_crawl(runtime: Runtime, clock: ManualClock) -> Incident:
    """A crawl (a kind with no actions of its own) ran past its budget."""
    start(runtime, "c1", "crawl", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    (live,) = runtime.store.incidents.list("live")
    return runtime.store.incidents.get(live.id)


def test_a_resolved_incident_is_diagnosed_as_it_is_now(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    start(acting, "t1", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(acting)
    (live,) = acting.store.incidents.list("live")
    incident = acting.store.incidents.get(live.id)
    card = post_card(acting, fake, incident)
    clock.advance(30)
    reports_for(acting).finish("swarm_task", "t1", "wrote 40 pages")
    sweep(acting)
    resolved = acting.store.incidents.get(incident.id)
    assert resolved.status is IncidentStatus.RESOLVED
    assert acting.decider.offered(resolved) == [Action.DIAGNOSE]
    text = diagnosed(acting, clock, fake, card)
    assert "succeeded" in text and "12:01 UTC" in text
    assert "is stalled" not in text
    assert named_buttons(text) == set(), text


def test_an_open_incident_recommends_only_the_buttons_it_offers(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    incident = stalled_crawl(acting, clock)
    offered = acting.decider.offered(incident)
    assert offered == [Action.DISMISS, Action.DIAGNOSE]
    text = diagnosed(acting, clock, fake, post_card(acting, fake, incident))
    assert "has been stalled since" in text
    assert named_buttons(text) == {Action.DISMISS}, text


def test_a_failure_with_unknown_effects_names_the_checked_retry_only_when_offered(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    start(acting, "t2", "swarm_task")
    reports_for(acting).fail("swarm_task", "t2", "posted half the replies", None, None)
    start(acting, "c2", "crawl")
    reports_for(acting).fail("crawl", "c2", "posted half the replies", None, None)
    sweep(acting)
    by_kind = {
        i.key.kind: acting.store.incidents.get(i.id) for i in acting.store.incidents.list("live")
    }
    swarm, crawl = by_kind["swarm_task"], by_kind["crawl"]
    assert Action.RETRY_CHECKED in acting.decider.offered(swarm)
    assert Action.RETRY_CHECKED not in acting.decider.offered(crawl)
    swarm_text = diagnosed(acting, clock, fake, post_card(acting, fake, swarm))
    assert "Retry (I checked its effects)" in swarm_text
    crawl_text = diagnosed(acting, clock, fake, post_card(acting, fake, crawl))
    assert named_buttons(crawl_text) <= {Action.DISMISS}, crawl_text
