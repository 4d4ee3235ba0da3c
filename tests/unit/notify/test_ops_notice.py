"""Operator notices reach the ops chats through the channels they are handed.

No event loop of their own: the supervisor awaits them.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.config import OpsConfig
from watchkeeper.notify.channels.base import Channel, SendResult
from watchkeeper.notify.channels.log import LogChannel
from watchkeeper.notify.message import Message, Target
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.watch.selfcheck import Notice, NoticeKind

AT = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
DOWN = Notice(NoticeKind.DOWN, AT, AT, "database is away")


class Recording(LogChannel):
    """A log channel that remembers where each message went."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[Target] = []

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        self.targets.append(target)
        return await super().send(target, message, idempotency_key)


def test_a_notice_goes_to_the_shared_channel_of_each_ops_chat() -> None:
    slack = Recording()
    channels: dict[str, Channel] = {}
    ops = OpsNotifier(OpsConfig(channels=["log", "slack:COPS/17"]), channels=channels)
    channels["slack"] = slack  # shared later, as the server does when it starts
    asyncio.run(ops.send(DOWN))
    assert [(t.channel, t.chat_id, t.thread_id) for t in slack.targets] == [("slack", "COPS", "17")]
    assert slack.recent[0][1].text.startswith("Run supervision is not working")
    assert ops.sent == [DOWN]


def test_an_ops_chat_with_no_channel_is_logged_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ops = OpsNotifier(OpsConfig(channels=["telegram:-100/7"]))
    asyncio.run(ops.send(DOWN))
    assert "Ops channel telegram:-100/7 is not configured" in caplog.text
    assert ops.sent == [DOWN]


def test_webhook_retries_back_off_on_the_notifier_clock() -> None:
    clock = ManualClock(autojump=True)
    config = OpsConfig(webhook_url="http://127.0.0.1:9/hook", webhook_secret="s", channels=["log"])
    ops = OpsNotifier(config, attempts=3, clock=clock)
    asyncio.run(ops.send(DOWN))  # nothing listens on port 9: every attempt fails at once
    assert clock.now() == pytest.approx(0.2 + 0.4 + 0.8)
    assert ops.sent == [DOWN]
