"""Notices for operators: the log, and a signed webhook. Needs no database."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import httpx

from watchkeeper.clock import rfc3339
from watchkeeper.config import OpsConfig, Settings
from watchkeeper.notify.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from watchkeeper.watch.selfcheck import Notice, NoticeKind

log = logging.getLogger(__name__)


def notice_payload(notice: Notice) -> dict[str, Any]:
    """The JSON body of an ops notice."""
    return {
        "type": notice.kind.value,
        "text": notice.text,
        "at": rfc3339(notice.at),
        "failing_since": rfc3339(notice.failing_since),
        "error": notice.error,
    }


class OpsNotifier:
    """Sends supervision notices to the log, the signed webhook and every ops chat channel.

    Nothing here touches the database: the database may be what is down. Chat
    channels are called directly, each with a fresh connection.
    """

    def __init__(
        self, config: OpsConfig, attempts: int = 3, settings: Settings | None = None
    ) -> None:
        self.config = config
        self.attempts = attempts
        self.settings = settings
        self.sent: list[Notice] = []

    def send(self, notice: Notice) -> None:
        """Deliver ``notice``; blocking, so callers run it off the event loop."""
        level = logging.ERROR if notice.kind is NoticeKind.DOWN else logging.WARNING
        log.log(level, notice.text, extra={"action": notice.kind.value})
        self.sent.append(notice)
        if self.config.webhook_url:
            self._post(notice_payload(notice))
        chats = [c for c in self.config.channels if c not in {"log", "webhook"}]
        if chats and self.settings is not None:
            asyncio.run(self._to_chats(notice, chats, self.settings))

    async def _to_chats(self, notice: Notice, places: list[str], settings: Settings) -> None:
        from watchkeeper.notify.channels.registry import build_channels
        from watchkeeper.notify.message import Message
        from watchkeeper.notify.router import parse_place

        channels = build_channels(settings)
        try:
            for place in places:
                target = parse_place(place)
                channel = channels.get(target.channel)
                if channel is None:
                    log.warning(
                        "Ops channel %s is not configured", place, extra={"action": "ops_notice"}
                    )
                    continue
                message = Message(notice.text, (), notice.text.split(":")[0])
                result = await channel.send(
                    target, message, f"{notice.kind.value}-{notice.at.timestamp():.0f}"
                )
                if result.outcome.value != "sent":
                    log.warning(
                        "Ops notice to %s: %s (%s)", place, result.outcome.value, result.error,
                        extra={"action": "ops_notice"},
                    )  # fmt: skip
        finally:
            for channel in channels.values():
                await channel.aclose()

    def _post(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.config.webhook_secret:
            stamp = str(int(time.time()))
            headers[TIMESTAMP_HEADER] = stamp
            headers[SIGNATURE_HEADER] = sign(self.config.webhook_secret, stamp, body)
        url = self.config.webhook_url
        assert url is not None
        for attempt in range(1, self.attempts + 1):
            try:
                response = httpx.post(
                    url, content=body, headers=headers, timeout=self.config.timeout_s
                )
            except httpx.HTTPError as exc:
                log.warning(
                    "Ops webhook attempt %d failed: %s",
                    attempt,
                    exc,
                    extra={"action": "ops_webhook"},
                )
            else:
                if response.is_success:
                    return
                log.warning(
                    "Ops webhook attempt %d answered HTTP %d",
                    attempt,
                    response.status_code,
                    extra={"action": "ops_webhook"},
                )
                if response.status_code < 500 and response.status_code != 429:
                    return
            time.sleep(min(2.0**attempt * 0.1, 2.0))
