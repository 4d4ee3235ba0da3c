"""The install as its pages read it: deliveries per channel, forge webhooks and counts."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import make_settings
from watchkeeper.clock import ManualClock
from watchkeeper.notify.install import InstallView
from watchkeeper.store import Store
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.queueing import NewDelivery


def _message(
    store: Store,
    key: str,
    channel: str,
    status: DeliveryStatus,
    clock: ManualClock,
    error: str | None = None,
) -> None:
    (made,) = store.outbox.enqueue(
        [NewDelivery(key, None, "card", channel, {"chat": "C1"}, {"text": key})], clock()
    )
    assert store.outbox.claim(made, "test", clock())
    clock.advance(1)
    assert store.outbox.settle(made, status, clock(), error=error)


def test_each_channel_counts_its_fates_and_says_its_latest(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    settings = make_settings(
        tmp_path,
        store.url,
        slack={"bot_token_env": "SLACK_BOT_TOKEN"},
        ops={"webhook_url": "https://hooks.example.org/T0KEN", "webhook_secret": "s3cret"},
        forge={"linear_secret_env": "LINEAR_SECRET"},
        admins={"slack": ["U1", "U2"]},
    )
    view = InstallView(store, settings)
    assert view.counts().cards_sent == 0
    _message(store, "a", "slack", DeliveryStatus.SENT, clock)
    _message(store, "b", "slack", DeliveryStatus.FAILED, clock, "channel_not_found")
    _message(store, "c", "slack", DeliveryStatus.SENT, clock)
    _message(store, "d", "webhook", DeliveryStatus.MAYBE_SENT, clock, "timed out")
    _message(store, "e", "log", DeliveryStatus.SENT, clock)

    found = {i.name: i for i in view.integrations()}
    slack = found["slack"]
    assert slack.configured and slack.channel is not None
    assert (slack.channel.sent, slack.channel.failed, slack.channel.last_status) == (2, 1, "sent")
    assert slack.last_failure is not None and slack.last_failure[1] == "channel_not_found"
    assert slack.setup == ("bot token from $SLACK_BOT_TOKEN", "2 admin(s)")
    webhook = found["webhook"]
    assert webhook.channel is not None and webhook.channel.last_status == "maybe_sent"
    assert webhook.setup == ("posts to hooks.example.org", "signed")
    assert not found["telegram"].configured and found["telegram"].channel is None
    assert found["linear"].configured and not found["github"].configured
    assert "T0KEN" not in repr(found) and "s3cret" not in repr(found)
    # Cards delivered to a chat: the log is no chat, and a maybe is no delivery.
    assert view.counts().cards_sent == 2
    assert view.chat_configured()
