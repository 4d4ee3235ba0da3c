"""A kind that reports some conditions itself: those are recorded, the others still paged.

Through the local Telegram fake: the chat the work came from receives what
watchkeeper sends, and nothing else.
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


def test_a_self_reported_failure_is_recorded_not_messaged_and_a_stall_is_paged(
    tmp_path: Path, store: Store, clock: ManualClock, fake: FakeTelegram
) -> None:
    settings = make_settings(
        tmp_path,
        store.url,
        telegram={"bot_token": TOKEN, "base_url": fake.url, "timeout_s": 5},
        kinds={"nightly": {"preset": "scheduled_job"}},
    )
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    notifier = runtime.build_notifier({"telegram": TelegramChannel(settings.telegram)})
    start(runtime, "n-failed", "nightly", lease_s=7200, origin=ORIGIN)
    start(runtime, "n-stalled", "nightly", lease_s=7200, origin=ORIGIN)
    reports_for(runtime).fail("nightly", "n-failed", "exit status 3", None, None)
    clock.advance(901)  # past the preset's 900 s budget

    async def sweep_and_deliver() -> tuple[int, int]:
        result = await runtime.sweeper.sweep()
        notifier.route(clock())
        sent = await notifier.deliver_due()
        await notifier.aclose()
        return len(result.applied.opened), sent

    try:
        assert asyncio.run(sweep_and_deliver()) == (2, 1)
    finally:
        runtime.sweeper.close()
    recorded = {(i.key.run_id, i.key.condition) for i in store.incidents.list("open")}
    assert recorded == {("n-failed", "failed"), ("n-stalled", "stalled")}
    (card,) = fake.messages(CHAT)
    assert "nightly n-stalled" in card.text and "stalled" in card.text
    assert "n-failed" not in card.text
    assert card.buttons, "the judged condition's card offers its buttons"
