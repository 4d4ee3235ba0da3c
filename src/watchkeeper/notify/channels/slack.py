"""Slack through the Web API: cards as Block Kit messages, edits, ephemeral answers.

Every call is ``POST {base_url}/{method}`` with a bearer token and a JSON body.
Slack answers refusals with HTTP 200 and ``{"ok": false, "error": "..."}``
(``channel_not_found``, ``not_in_channel``, ``invalid_blocks`` ...); rate
limits with HTTP 429 and ``Retry-After``. Blocks are built as JSON, cut to or
checked against the limits ``slack_sdk.models.blocks`` checks. No call
is ever retried here: the outbox alone decides whether a message is sent again.

Slack keeps a card's buttons once it is decided (the card says who decided);
a later press is answered, to the presser only, with who decided.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from slack_sdk.errors import SlackObjectFormationError

from watchkeeper.config import SlackConfig
from watchkeeper.notify.channels.base import (
    ChatChannel,
    SendOutcome,
    SendResult,
    classify_status,
    decoded_json,
    fit,
)
from watchkeeper.notify.message import Button, Message, Target

log = logging.getLogger(__name__)

#: Slack's limits (characters).
SECTION_LIMIT = 3000
TEXT_LIMIT = 40000
LABEL_LIMIT = 75
VALUE_LIMIT = 2000
ACTION_ID_LIMIT = 255
#: Elements of one actions block, and blocks of one message.
ELEMENTS_LIMIT = 25
BLOCKS_LIMIT = 50
#: Every button's ``action_id`` starts with this; the action's name follows.
ACTION_PREFIX = "wk_"
#: Errors (in an HTTP 200 ``ok: false`` answer) that mean "not now, try again".
_RETRY_ERRORS = frozenset({"ratelimited", "rate_limited"})
#: Errors after which nobody can tell whether the message was posted.
_AMBIGUOUS_ERRORS = frozenset({"internal_error", "fatal_error", "service_unavailable"})


@dataclass(frozen=True, slots=True)
class SlackSendResult(SendResult):
    """A send's result plus the conversation Slack posted into (a DM's own id, say)."""

    channel: str | None = None


def escape(text: str) -> str:
    """Slack's three control characters, escaped as its formatting rules require."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def button(b: Button) -> dict[str, Any]:
    """One button: its label, ``wk_<action>`` as action id, the button data as value."""
    action_id = f"{ACTION_PREFIX}{b.action}"
    if len(action_id) > ACTION_ID_LIMIT or len(b.data) > VALUE_LIMIT:
        raise SlackObjectFormationError(
            f"a button's action_id or value is too long: {action_id!r}, {len(b.data)} characters"
        )
    label = {"type": "plain_text", "text": fit(b.label, LABEL_LIMIT)}
    return {"type": "button", "text": label, "action_id": action_id, "value": b.data}


def blocks_json(message: Message) -> list[dict[str, Any]]:
    """A section with the text (mrkdwn) and, when there are buttons, an actions block.

    Built straight as JSON, checked against the limits Slack's block models
    check (what Slack would refuse raises ``SlackObjectFormationError``): the
    models' own checks cost a card's call more than the rest of its body.
    """
    text = fit(escape(message.text or " "), SECTION_LIMIT)
    built: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    if message.buttons:
        if len(message.buttons) > ELEMENTS_LIMIT:
            raise SlackObjectFormationError(
                f"an actions block holds at most {ELEMENTS_LIMIT} elements"
            )
        built.append({"type": "actions", "elements": [button(b) for b in message.buttons]})
    return built


def post_body(target: Target, message: Message) -> dict[str, Any]:
    """``chat.postMessage``: channel, thread, fallback text and blocks.

    A note under a card goes to the card's thread: the thread the card is in,
    or one started from the card (Slack threads do not nest).
    """
    body: dict[str, Any] = {
        "channel": target.chat_id,
        "text": fit(message.headline or message.text or " ", TEXT_LIMIT),
        "blocks": blocks_json(message),
    }
    thread = target.thread_id or target.reply_to
    if thread:
        body["thread_ts"] = thread
    return body


def update_body(channel: str, ts: str, message: Message) -> dict[str, Any]:
    """``chat.update``: the same message, new text and blocks."""
    return {
        "channel": channel,
        "ts": ts,
        "text": fit(message.headline or message.text or " ", TEXT_LIMIT),
        "blocks": blocks_json(message),
    }


def _sections(text: str) -> list[dict[str, Any]]:
    """``text`` as mrkdwn sections of at most :data:`SECTION_LIMIT` characters, cut at lines."""
    chunks: list[str] = []
    for line in escape(text or " ").splitlines() or [" "]:
        line = fit(line, SECTION_LIMIT)
        if chunks and len(chunks[-1]) + 1 + len(line) <= SECTION_LIMIT:
            chunks[-1] += "\n" + line
        else:
            chunks.append(line)
    return [{"type": "section", "text": {"type": "mrkdwn", "text": c}} for c in chunks]


def runs_reply(
    text_for: Callable[[int], str], items: Sequence[tuple[str, Sequence[Button]]]
) -> dict[str, Any]:
    """The ephemeral answer to ``/runs``: the list as sections, then each item's line and its
    buttons, for as many items as fit Slack's 50 blocks (``text_for(n)`` words the list when
    the first ``n`` items carry their buttons)."""
    shown = min(len(items), BLOCKS_LIMIT // 2)
    while True:
        text = text_for(shown)
        listed = _sections(text)[: BLOCKS_LIMIT - 2 * shown] or _sections(" ")
        if len(listed) + 2 * shown <= BLOCKS_LIMIT or shown == 0:
            break
        shown -= 1
    blocks = list(listed)
    for line, buttons in items[:shown]:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": fit(escape(line), SECTION_LIMIT)},
            }
        )
        blocks.append(
            {"type": "actions", "elements": [button(b) for b in buttons[:ELEMENTS_LIMIT]]}
        )
    return {"response_type": "ephemeral", "text": fit(text or " ", TEXT_LIMIT), "blocks": blocks}


def ephemeral_reply(text: str) -> dict[str, Any]:
    """What goes to a ``response_url``: seen by the presser only, the card left as it is."""
    return {"response_type": "ephemeral", "replace_original": False, "text": fit(text, TEXT_LIMIT)}


def refusal(error: str) -> SendResult:
    """An ``ok: false`` answer: rate limits retry, internal errors cannot tell, others fail."""
    reason = f"Slack: {error}"
    if error in _RETRY_ERRORS:
        return SendResult(SendOutcome.RETRY, error=reason)
    if error in _AMBIGUOUS_ERRORS:
        return SendResult(SendOutcome.MAYBE_SENT, error=reason)
    return SendResult(SendOutcome.FAILED, error=reason)


class SlackChannel(ChatChannel[SlackConfig]):
    """Posts cards to Slack conversations and threads, edits them, answers presses."""

    name = "slack"
    idempotent_sends = False
    per_chat_rate = 1.0

    def pace_key(self, target: Target) -> str:
        """One row per chat: Slack counts the posts to a chat's threads together."""
        return Target(self.name, target.chat_id).place

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        """``chat.postMessage``; the message id is Slack's ``ts``."""
        body = self._body(lambda: post_body(target, message))
        if isinstance(body, SendResult):
            return body
        return await self._message_call("chat.postMessage", body, target)

    async def edit(self, target: Target, message: Message) -> SendResult:
        """``chat.update`` of the message ``ts`` = ``target.message_id``; safe to repeat."""
        if not target.message_id:
            return SendResult(SendOutcome.FAILED, error="no message ts to edit")
        channel = target.extra.get("channel") or target.chat_id
        message_id = target.message_id
        body = self._body(lambda: update_body(channel, message_id, message))
        if isinstance(body, SendResult):
            return body
        return await self._message_call("chat.update", body, target)

    async def respond(self, response_url: str, text: str) -> SendResult:
        """An ephemeral answer to whoever pressed, through the press's ``response_url``."""
        answer = await self._request("POST", response_url, ephemeral_reply(text))
        if isinstance(answer, httpx.Response):
            if answer.is_success:
                return SendResult(SendOutcome.SENT)
            answer = classify_status(answer)
        log.warning("Slack response_url: %s", answer.error, extra={"action": "slack_respond"})
        return answer

    def _body(self, build: Callable[[], dict[str, Any]]) -> dict[str, Any] | SendResult:
        try:
            body = build()
        except SlackObjectFormationError as exc:
            return SendResult(SendOutcome.FAILED, error=f"Slack would refuse the blocks: {exc}")
        return body

    async def _message_call(self, method: str, body: dict[str, Any], target: Target) -> SendResult:
        result = await self._call(method, body)
        if result.outcome is not SendOutcome.SENT:
            log.warning(
                "Slack %s to %s: %s",
                method,
                target.place,
                result.error,
                extra={"action": "slack_send"},
            )
        return result

    async def _call(self, method: str, body: dict[str, Any]) -> SendResult:
        unconfigured = self._unconfigured()
        if unconfigured is not None:
            return unconfigured
        headers = {"Authorization": f"Bearer {self._token}"}
        response = await self._request("POST", f"{self.base_url}/{method}", body, headers)
        if isinstance(response, SendResult):
            return response
        if not response.is_success:
            return classify_status(response)
        decoded = decoded_json(response)
        if not isinstance(decoded, dict) or "ok" not in decoded:
            return SendResult(
                SendOutcome.MAYBE_SENT,
                error=f"Slack answered HTTP {response.status_code} without a Web API body",
            )
        if decoded["ok"] is not True:
            return refusal(str(decoded.get("error") or "unknown_error"))
        ts = decoded.get("ts")
        if not ts:
            return SendResult(SendOutcome.MAYBE_SENT, error="Slack accepted without a message ts")
        channel = decoded.get("channel")
        return SlackSendResult(
            SendOutcome.SENT, message_id=str(ts), channel=str(channel) if channel else None
        )
