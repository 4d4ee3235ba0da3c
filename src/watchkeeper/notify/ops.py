"""Notices for operators: the log, a signed webhook and the ops chats. Needs no database."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import httpx

from watchkeeper.backoff import backoff_delay
from watchkeeper.clock import Clock, WallClock, rfc3339
from watchkeeper.config import OpsConfig
from watchkeeper.notify.channels.base import Channel
from watchkeeper.notify.message import Message
from watchkeeper.notify.signing import signed_headers
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
    notices go straight to the channels the server uses (``channels``, shared
    once it starts), never through the outbox. ``clock`` (wall time unless
    given) stamps the webhook's signature and paces its retries.
    """

    def __init__(
        self,
        config: OpsConfig,
        attempts: int = 3,
        channels: Mapping[str, Channel] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.attempts = attempts
        self.channels: Mapping[str, Channel] = channels if channels is not None else {}
        self.clock: Clock = clock or WallClock()
        self.sent: list[Notice] = []

    async def send(self, notice: Notice) -> None:
        """Deliver ``notice`` to the log, the webhook and the ops chats."""
        level = logging.ERROR if notice.kind is NoticeKind.DOWN else logging.WARNING
        log.log(level, notice.text, extra={"action": notice.kind.value})
        self.sent.append(notice)
        if self.config.webhook_url:
            await self._post(notice_payload(notice))
        chats = [c for c in self.config.channels if c not in {"log", "webhook"}]
        if chats:
            await self._to_chats(notice, chats)

    async def _to_chats(self, notice: Notice, places: list[str]) -> None:
        from watchkeeper.notify.router import parse_place  # lazy: the router knows decisions

        for place in places:
            target = parse_place(place)
            channel = self.channels.get(target.channel)
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
                    "Ops notice to %s: %s (%s)",
                    place,
                    result.outcome.value,
                    result.error,
                    extra={"action": "ops_notice"},
                )

    async def _post(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        headers = signed_headers(self.config.webhook_secret, body, self.clock.now())
        url = self.config.webhook_url
        assert url is not None
        async with httpx.AsyncClient(timeout=self.config.timeout_s) as http:
            for attempt in range(1, self.attempts + 1):
                try:
                    response = await http.post(url, content=body, headers=headers)
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
                delay = backoff_delay(attempt, initial=0.1, factor=2.0, cap=2.0)
                await self.clock.sleep_until(self.clock.now() + delay)
