"""Discord through its HTTP API: cards with buttons, edits, interaction follow-ups.

A card is ``POST {base_url}/channels/{chat_id}/messages`` with ``Authorization:
Bot <token>``, its buttons in action rows of at most five. Every post carries
a nonce with ``enforce_nonce``: Discord checks it "for uniqueness in the past
few minutes" and answers a second create with the same nonce by the same
author with the message it already created, so a send whose answer was lost,
or whose process died mid-call, is safe to repeat (``idempotent_sends``)
within ``resend_window`` of its first call. Errors come back as
``{"message": "...", "code": N}``; a 429 carries ``retry_after`` in seconds.
No call is ever retried here: the outbox alone decides whether to send again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx

from watchkeeper.config import DiscordConfig
from watchkeeper.notify.channels import base
from watchkeeper.notify.channels.base import (
    ChatChannel,
    SendOutcome,
    SendResult,
    classify_status,
    decoded_json,
)
from watchkeeper.notify.message import Button, Message, Target

log = logging.getLogger(__name__)

#: Discord's limits.
CONTENT_LIMIT = 2000
LABEL_LIMIT = 80
CUSTOM_ID_LIMIT = 100
NONCE_LIMIT = 25
ROW_WIDTH = 5
MAX_ROWS = 5
#: Message flag: only the presser sees it.
EPHEMERAL = 64
#: Button styles: primary (blurple), secondary (grey), danger (red).
PRIMARY, SECONDARY, DANGER = 1, 2, 4
_STYLES = {
    "cancel": DANGER,
    "close_turn": DANGER,
    "stop": DANGER,
    "retry": PRIMARY,
    "retry_checked": PRIMARY,
    "restart": PRIMARY,
}


def fit(text: str, limit: int = CONTENT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters (a message's, unless told), ending in an ellipsis."""
    return base.fit(text, limit)


def button(b: Button) -> dict[str, Any]:
    """One button component (``type`` 2) whose ``custom_id`` is the button's data."""
    return {
        "type": 2,
        "style": _STYLES.get(b.action, SECONDARY),
        "label": fit(b.label, LABEL_LIMIT),
        "custom_id": b.data,
    }


def components(buttons: tuple[Button, ...]) -> list[dict[str, Any]]:
    """Action rows (``type`` 1) of at most five buttons; an empty list removes every button."""
    cells = [button(b) for b in buttons[: ROW_WIDTH * MAX_ROWS]]
    return [
        {"type": 1, "components": cells[i : i + ROW_WIDTH]} for i in range(0, len(cells), ROW_WIDTH)
    ]


def runs_components(items: Sequence[Sequence[Button]]) -> list[dict[str, Any]]:
    """A ``/runs`` answer's buttons: a row per item, as many items as Discord's five rows
    hold, at most five buttons each."""
    return [
        {"type": 1, "components": [button(b) for b in row[:ROW_WIDTH]]}
        for row in items[:MAX_ROWS]
        if row
    ]


def create_body(
    message: Message, idempotency_key: str, reply_to: str | None = None
) -> dict[str, Any]:
    """The body of "create message": content, buttons, the nonce Discord enforces, and the
    message it replies to (a note under its card; sent as no reply if the card is gone)."""
    body: dict[str, Any] = {
        "content": fit(message.text or " "),
        "components": components(message.buttons),
        "nonce": idempotency_key[:NONCE_LIMIT],
        "enforce_nonce": True,
    }
    if reply_to:
        body["message_reference"] = {"message_id": reply_to, "fail_if_not_exists": False}
    return body


def edit_body(message: Message) -> dict[str, Any]:
    """The body of "edit message": the new content and buttons (none: buttons gone)."""
    return {"content": fit(message.text or " "), "components": components(message.buttons)}


def _too_long_id(buttons: tuple[Button, ...]) -> SendResult | None:
    for b in buttons:
        if len(b.data) > CUSTOM_ID_LIMIT:
            return SendResult(
                SendOutcome.FAILED,
                error=f"button {b.label!r} carries {len(b.data)} characters of data; "
                f"Discord allows {CUSTOM_ID_LIMIT}: not sent",
            )
    return None


def failure(response: httpx.Response) -> SendResult:
    """A non-2xx answer: 429 retries after ``retry_after``, other 4xx fail, 5xx cannot tell."""
    decoded = decoded_json(response)
    if not isinstance(decoded, dict):
        return classify_status(response)
    retry_after = decoded.get("retry_after")
    retry_s = float(retry_after) if isinstance(retry_after, int | float) else None
    result = classify_status(response, retry_s)
    scope = " (global)" if decoded.get("global") is True else ""
    reason = (
        f"Discord HTTP {response.status_code}{scope}: {decoded.get('message') or 'no message'}"
        f" (code {decoded.get('code', 0)})"
    )
    return SendResult(result.outcome, error=reason, retry_after_s=result.retry_after_s)


class DiscordChannel(ChatChannel[DiscordConfig]):
    """Posts cards to Discord channels and threads, edits them, follows up on interactions."""

    name = "discord"
    idempotent_sends = True
    #: Discord says "a few minutes" and names no number: two, to stay inside it.
    resend_window = timedelta(minutes=2)
    per_chat_rate = 1.0
    #: Discord's global limit: 50 requests a second per bot. Each channel's route has a
    #: bucket of its own, which the answers' ``X-RateLimit-*`` headers describe.
    global_rate: float | None = 50.0

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        """Create a message in ``target.chat_id`` (or in the thread, itself a channel)."""
        refused = _too_long_id(message.buttons)
        if refused is not None:
            return refused
        channel_id = target.thread_id or target.chat_id
        url = f"{self.base_url}/channels/{channel_id}/messages"
        body = create_body(message, idempotency_key, target.reply_to)
        result = await self._call("POST", url, body, target)
        if result.outcome is SendOutcome.SENT and result.message_id is None:
            return SendResult(
                SendOutcome.MAYBE_SENT, error="Discord accepted the message without its id"
            )
        return result

    async def edit(self, target: Target, message: Message) -> SendResult:
        """Replace a message's content and buttons; safe to repeat."""
        if not target.message_id:
            return SendResult(SendOutcome.FAILED, error="no message id to edit")
        refused = _too_long_id(message.buttons)
        if refused is not None:
            return refused
        channel_id = target.thread_id or target.chat_id
        url = f"{self.base_url}/channels/{channel_id}/messages/{target.message_id}"
        result = await self._call("PATCH", url, edit_body(message), target)
        if result.outcome is SendOutcome.SENT:
            return SendResult(SendOutcome.SENT, message_id=target.message_id)
        return result

    async def followup(self, application_id: str, interaction_token: str, text: str) -> SendResult:
        """An ephemeral follow-up to an interaction: only the presser sees it.

        Follow-ups are authorised by the interaction token in the path; no bot token.
        """
        url = f"{self.base_url}/webhooks/{application_id}/{interaction_token}"
        body = {"content": fit(text or " "), "flags": EPHEMERAL}
        return await self._call("POST", url, body, None, authorised=False)

    async def _call(
        self,
        method: str,
        url: str,
        body: dict[str, Any],
        target: Target | None,
        *,
        authorised: bool = True,
    ) -> SendResult:
        headers: dict[str, str] = {}
        if authorised:
            unconfigured = self._unconfigured()
            if unconfigured is not None:
                return unconfigured
            headers["Authorization"] = f"Bot {self._token}"
        answer = await self._request(method, url, body, headers)
        result = answer if isinstance(answer, SendResult) else _result(answer)
        if result.outcome is not SendOutcome.SENT:
            place = target.place if target is not None else "an interaction"
            log.warning(
                "Discord %s %s: %s", method, place, result.error, extra={"action": "discord_send"}
            )
        return result


def _result(response: httpx.Response) -> SendResult:
    result = (
        failure(response)
        if not response.is_success
        else SendResult(SendOutcome.SENT, message_id=_message_id(response))
    )
    hold = bucket_spent_for(response)
    return result if hold is None else replace(result, hold_s=hold)


def bucket_spent_for(response: httpx.Response) -> float | None:
    """Seconds until the route's bucket refills, when this answer spent its last call."""
    if response.headers.get("X-RateLimit-Remaining") != "0":
        return None
    try:
        return max(0.0, float(response.headers.get("X-RateLimit-Reset-After", "")))
    except ValueError:
        return None


def _message_id(response: httpx.Response) -> str | None:
    decoded = decoded_json(response)
    if isinstance(decoded, dict) and decoded.get("id") is not None:
        return str(decoded["id"])
    return None
