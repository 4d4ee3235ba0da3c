"""A generic signed webhook: JSON POSTed with an HMAC-SHA256 signature over the body."""

from __future__ import annotations

import json

import httpx

from watchkeeper.clock import Now, utcnow
from watchkeeper.config import OpsConfig
from watchkeeper.notify.channels.base import (
    Channel,
    SendOutcome,
    SendResult,
    classify_error,
    classify_status,
)
from watchkeeper.notify.message import Message, Target
from watchkeeper.notify.signing import signed_headers


class WebhookChannel(Channel):
    """POSTs ``{"type", "text", "buttons", "target", "idempotency_key"}`` to the ops webhook."""

    name = "webhook"
    per_chat_rate = 100.0

    def __init__(
        self,
        config: OpsConfig,
        http: httpx.AsyncClient | None = None,
        *,
        clock: Now = utcnow,
    ) -> None:
        self.config = config
        self._http = http or httpx.AsyncClient(timeout=config.timeout_s)
        self._clock = clock

    async def _post(self, body: dict[str, object]) -> SendResult:
        if not self.config.webhook_url:
            return SendResult(SendOutcome.FAILED, error="[ops] webhook_url is not configured")
        raw = json.dumps(body).encode()
        headers = signed_headers(self.config.webhook_secret, raw, self._clock().timestamp())
        try:
            response = await self._http.post(self.config.webhook_url, content=raw, headers=headers)
        except httpx.HTTPError as exc:
            return classify_error(exc)
        if not response.is_success:
            return classify_status(response)
        return SendResult(SendOutcome.SENT, message_id=response.headers.get("X-Message-Id"))

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        """POST a new message."""
        return await self._post(
            {"type": "message", "idempotency_key": idempotency_key, **message.as_dict()}
        )

    async def edit(self, target: Target, message: Message) -> SendResult:
        """POST the new form of a message (receivers key it by ``message_id``)."""
        return await self._post(
            {"type": "update", "message_id": target.message_id, **message.as_dict()}
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()
