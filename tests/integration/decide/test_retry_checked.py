"""Retry after checking effects reaches the kind as a retry, with a flag that the presser checked.

The button a card carries is still ``retry_checked`` (cards already in chats
carry it), so a press of an old card works; the kind's own function is told
``retry`` and ``effects_checked``, never a separate action name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action
from watchkeeper.decide.actors import Actor
from watchkeeper.decide.decider import Outcome
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.live_server import live_server
from ...support.waiting import wait_for
from ..fakes.discord import fake_discord
from ..fakes.platform import FakePlatform
from ..fakes.slack import fake_slack
from ..helpers import reports_for, start, sweep
from ..notify.chat import chat_runtime, deliver, failed, now_s, user
from ..recorder import Recorder, recording_server

FAKES: dict[str, Callable[[], AbstractContextManager[FakePlatform]]] = {
    "discord": fake_discord,
    "slack": fake_slack,
}
ANA = Actor("@ana", "api", is_admin=True)


@pytest.fixture(params=sorted(FAKES))
def fake(request: pytest.FixtureRequest) -> Iterator[FakePlatform]:
    with FAKES[request.param]() as started:
        yield started


@pytest.fixture
def service() -> Iterator[Recorder]:
    with recording_server() as recorder:
        yield recorder


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder, fake: FakePlatform
) -> Iterator[Runtime]:
    runtime = chat_runtime(tmp_path, store, clock, service.url, fake)
    yield runtime
    runtime.sweeper.close()


def test_a_card_press_reaches_the_kind_as_a_retry_with_the_checked_flag(
    acting: Runtime, clock: ManualClock, fake: FakePlatform, service: Recorder
) -> None:
    failed(acting, fake)
    assert deliver(acting, clock, fake) == 1
    (card,) = fake.in_channel(fake.CHAT)
    with live_server(acting) as server:
        fake.press(
            server.url,
            card,
            "Retry (I checked its effects)",
            user(fake, "ana"),
            "ana",
            now_s(clock),
        )
        # The action service's recorder notifies nobody: look again until its call arrives
        # (the fake platform's condition only wakes on the platform's own requests).
        wait_for(lambda: len(service.requests) == 1, what="the kind's retry call")
    (call,) = service.requests
    assert call.path == "/retry/t9"
    body = call.json()
    assert (body["action"], body["effects_checked"]) == ("retry", True)
    # The incident remembers what the person pressed.
    (incident,) = acting.store.incidents.list("live")
    decided = acting.store.incidents.get(incident.id).decision
    assert decided is not None and decided.action == Action.RETRY_CHECKED.value


def test_a_plain_retry_says_nobody_checked(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    start(acting, "clean", "swarm_task", effects="none")
    reports_for(acting).fail("swarm_task", "clean", "worker crashed", None, None)
    sweep(acting)
    (live,) = acting.store.incidents.list("live")
    result = acting.decider.press(live.id, "retry", live.state_token, ANA)
    assert result.outcome is Outcome.DONE
    (call,) = service.requests
    assert (call.json()["action"], call.json()["effects_checked"]) == ("retry", False)


def test_a_url_template_names_the_retry(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder
) -> None:
    kinds = {"swarm_task": {"actions": {"retry": {"url": f"{service.url}/{{action}}/{{run_id}}"}}}}
    settings = make_settings(tmp_path, store.url, kinds=kinds)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    try:
        start(runtime, "risky", "swarm_task")
        reports_for(runtime).fail("swarm_task", "risky", "posted half the replies", None, None)
        sweep(runtime)
        (live,) = runtime.store.incidents.list("live")
        result = runtime.decider.press(live.id, "retry_checked", live.state_token, ANA)
        assert result.outcome is Outcome.DONE
        assert [r.path for r in service.requests] == ["/retry/risky"]
    finally:
        runtime.sweeper.close()
