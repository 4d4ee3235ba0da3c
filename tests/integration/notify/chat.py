"""Our side of the Discord and Slack tests: settings, channels and runtimes for a fake platform.

The fakes (``tests/integration/fakes``) play the platforms; these helpers play
the watchkeeper that talks to them, so one scenario can run against either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from watchkeeper.clock import ManualClock
from watchkeeper.config import DiscordConfig, SlackConfig
from watchkeeper.config.chat import ChatConfig
from watchkeeper.notify import cards
from watchkeeper.notify.channels.base import ChatChannel, SendResult
from watchkeeper.notify.channels.discord import DiscordChannel
from watchkeeper.notify.channels.slack import SlackChannel
from watchkeeper.notify.message import Button, Message, Target
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident

from ..decide.fixtures import acting_runtime
from ..fakes.platform import FakePlatform
from ..helpers import reports_for, start, sweep

T = TypeVar("T")

CONFIGS: dict[str, type[ChatConfig]] = {"discord": DiscordConfig, "slack": SlackConfig}
CHANNELS: dict[type[ChatConfig], type[ChatChannel[Any]]] = {
    DiscordConfig: DiscordChannel,
    SlackConfig: SlackChannel,
}
#: The people pressing buttons, by platform: ana and cleo are admins, bob is not.
USERS = {
    "discord": {
        "ana": "2100000000000000001",
        "bob": "2100000000000000002",
        "cleo": "2100000000000000003",
    },
    "slack": {"ana": "U0ANA", "bob": "U0BOB", "cleo": "U0CLEO"},
}
CARD = Message(
    "crawl c1 has stalled",
    (
        Button("Cancel", "cancel", "wk1:1:c:0123456789ab"),
        Button("Dismiss", "dismiss", "wk1:1:d:0123456789ab"),
        Button("Ask to diagnose", "diagnose", "wk1:1:g:0123456789ab"),
    ),
    "crawl c1 has stalled",
)


def user(fake: FakePlatform, name: str) -> str:
    """The id of ``name`` on ``fake``'s platform."""
    return USERS[fake.NAME][name]


def table(fake: FakePlatform, **changes: Any) -> dict[str, Any]:
    """Our settings table for ``fake``'s platform, pointing at it, with ``changes``."""
    return {**fake.credentials(), "timeout_s": 5.0, **changes}


def config(fake: FakePlatform, **changes: Any) -> Any:
    """:func:`table`, read as our settings read it."""
    return CONFIGS[fake.NAME](**table(fake, **changes))


def with_channel(settings: ChatConfig, use: Callable[[ChatChannel[Any]], Awaitable[T]]) -> T:
    """Run ``use`` against a fresh channel for ``settings`` in its own event loop; close it."""

    async def go() -> T:
        channel = channel_for(settings)
        try:
            return await use(channel)
        finally:
            await channel.aclose()

    return asyncio.run(go())


def channel_for(settings: ChatConfig) -> ChatChannel[Any]:
    """Our channel for the platform ``settings`` configure, sending as production does."""
    return CHANNELS[type(settings)](settings)


def send(
    fake: FakePlatform,
    message: Message = CARD,
    key: str = "wk1",
    target: Target | None = None,
    **changes: Any,
) -> SendResult:
    """Send ``message`` to the test conversation (or ``target``) through a fresh channel
    configured for ``fake`` with ``changes``."""
    place = target or Target(fake.NAME, fake.CHAT)
    return with_channel(config(fake, **changes), lambda c: c.send(place, message, key))


def chat_runtime(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    service_url: str,
    fake: FakePlatform,
    **changes: Any,
) -> Runtime:
    """A runtime whose ``fake.NAME`` table points at ``fake``; ana and cleo are admins."""
    admins = {name: [ids["ana"], ids["cleo"]] for name, ids in USERS.items()}
    settings = {fake.NAME: table(fake, **changes)}
    return acting_runtime(tmp_path, store, clock, service_url, admins=admins, **settings)


def stalled(runtime: Runtime, clock: ManualClock) -> Incident:
    """An incident: task t1 ran past its budget."""
    start(runtime, "t1", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    (live,) = runtime.store.incidents.list("live")
    return runtime.store.incidents.get(live.id)


def failed(runtime: Runtime, fake: FakePlatform) -> None:
    """An incident: task t9, started from ``fake``'s conversation, reported a crash."""
    start(runtime, "t9", "swarm_task", origin={"platform": fake.NAME, "chat_id": fake.CHAT})
    reports_for(runtime).fail("swarm_task", "t9", "worker crashed", None, None)
    sweep(runtime)


def post_card(runtime: Runtime, fake: FakePlatform, incident: Incident) -> Any:
    """Send the incident's card through the channel, as the outbox would; the fake's copy."""
    message = cards.card(incident, runtime.decider.offered(incident))
    settings = getattr(runtime.settings, fake.NAME)
    target = Target(fake.NAME, fake.CHAT)
    sent = with_channel(settings, lambda c: c.send(target, message, f"wk-card-{incident.id}"))
    return fake.message(str(sent.message_id))


def deliver(runtime: Runtime, clock: ManualClock, fake: FakePlatform) -> int:
    """Route and deliver what the outbox holds through a fresh channel; how many went out."""

    async def go() -> int:
        settings = getattr(runtime.settings, fake.NAME)
        channel = channel_for(settings)
        try:
            notifier = runtime.build_notifier({fake.NAME: channel})
            notifier.route(clock())
            return await notifier.deliver_due()
        finally:
            await channel.aclose()

    return asyncio.run(go())


def now_s(clock: ManualClock) -> int:
    """The test clock's time, as platforms stamp requests."""
    return int(clock().timestamp())
