"""The built-in kinds leave to their own alerts what the run-supervision design says they have.

An X post's failure has its publication notice, a memory task's its dead letter,
and the research monitor reports a research session that stalls: each is recorded
as an incident (pressed from the dashboard or ``/runs``), and nothing is sent for
it. The same kinds' other conditions are still paged. Through the local Telegram
fake: the chat the work came from receives what watchkeeper sends, and nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import make_settings
from .fakes.telegram import TOKEN, FakeTelegram, fake_telegram
from .helpers import reports_for, start

CHAT = -1009876543210
ORIGIN = {"platform": "telegram", "chat_id": str(CHAT)}


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with fake_telegram() as started:
        yield started
        assert started.invalid == [], "our channel sent something the Bot API would refuse"


def test_what_the_presets_leave_to_the_works_own_alerts_is_recorded_not_messaged(
    tmp_path: Path, store: Store, clock: ManualClock, fake: FakeTelegram
) -> None:
    telegram = {"bot_token": TOKEN, "base_url": fake.url, "timeout_s": 5}
    settings = make_settings(tmp_path, store.url, telegram=telegram)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    notifier = runtime.build_notifier({"telegram": TelegramChannel(settings.telegram)})
    for run_id, kind in (
        ("post-failed", "x_post"),
        ("post-stalled", "x_post"),
        ("memory-failed", "memory_task"),
        ("session-stalled", "research_session"),
        ("session-failed", "research_session"),
    ):
        start(runtime, run_id, kind, lease_s=7200, origin=ORIGIN)
    reports = reports_for(runtime)
    reports.fail("x_post", "post-failed", "the post was refused", None, None)
    reports.fail("memory_task", "memory-failed", "the write was refused", None, None)
    reports.fail("research_session", "session-failed", "the source vanished", None, None)
    clock.advance(301)  # past research_session's 180 s and x_post's 300 s

    async def sweep_and_deliver() -> int:
        await runtime.sweeper.sweep()
        notifier.route(clock())
        sent = await notifier.deliver_due()
        await notifier.aclose()
        return sent

    try:
        sent = asyncio.run(sweep_and_deliver())
    finally:
        runtime.sweeper.close()
    recorded = {(i.key.run_id, i.key.condition) for i in store.incidents.list("open")}
    assert recorded == {
        ("post-failed", "failed"),
        ("post-stalled", "stalled"),
        ("memory-failed", "failed"),
        ("session-stalled", "stalled"),
        ("session-failed", "failed"),
    }
    cards = fake.messages(CHAT)
    assert sent == len(cards) == 2
    paged = sorted(card.text.splitlines()[1].split(" · ")[0] for card in cards)
    assert paged == ["research_session session-failed", "x_post post-stalled"]
