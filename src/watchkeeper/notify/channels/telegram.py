"""Telegram through the Bot API: cards with inline keyboards, edits, callback answers.

Every call is one ``POST {base_url}/bot{token}/{method}`` with a JSON body.
Telegram answers ``{"ok": true, "result": ...}`` or ``{"ok": false,
"error_code": N, "description": "...", "parameters": {"retry_after": S}}``.
No call is ever retried here: the outbox alone decides whether a message is
sent again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from watchkeeper.config import TelegramConfig
from watchkeeper.notify.channels.base import (
    ChatChannel,
    SendOutcome,
    SendResult,
    classify_status,
    decoded_json,
)
from watchkeeper.notify.message import BUTTON_DATA_LIMIT, Button, Message, Target

log = logging.getLogger(__name__)

#: Telegram's limits, in characters as Telegram counts them (UTF-16 code units).
TEXT_LIMIT = 4096
CALLBACK_ANSWER_LIMIT = 200
#: At most this many buttons side by side.
ROW_WIDTH = 3
#: Telegram's widest keyboard row, and the most items of a ``/runs`` answer that carry
#: their buttons (a row each: at most a few dozen buttons in all).
ROW_LIMIT = 8
RUNS_ITEMS = 10
NOT_MODIFIED = "message is not modified"


def telegram_length(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def fit(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` Telegram characters, ending in an ellipsis when cut."""
    if telegram_length(text) <= limit:
        return text
    kept: list[str] = []
    used = 0
    for char in text:
        size = telegram_length(char)
        if used + size > limit - 1:
            break
        kept.append(char)
        used += size
    return "".join(kept) + "…"


def keyboard(buttons: tuple[Button, ...]) -> dict[str, Any]:
    """An inline keyboard: one row, or balanced rows of at most three buttons."""
    if not buttons:
        return {"inline_keyboard": []}
    rows = -(-len(buttons) // ROW_WIDTH)
    width = -(-len(buttons) // rows)
    cells = [{"text": b.label, "callback_data": b.data} for b in buttons]
    return {"inline_keyboard": [cells[i : i + width] for i in range(0, len(cells), width)]}


def rows_keyboard(rows: Sequence[Sequence[Button]]) -> dict[str, Any]:
    """An inline keyboard with one row per group of buttons (a ``/runs`` item's), each cut
    into rows of at most :data:`ROW_LIMIT`."""
    keyboard_rows = [
        [{"text": b.label, "callback_data": b.data} for b in row[i : i + ROW_LIMIT]]
        for row in rows
        for i in range(0, len(row), ROW_LIMIT)
    ]
    return {"inline_keyboard": keyboard_rows}


def oversized_button(buttons: tuple[Button, ...]) -> Button | None:
    """The first button whose data Telegram would refuse (over 64 bytes), if any."""
    for button in buttons:
        if len(button.data.encode()) > BUTTON_DATA_LIMIT:
            return button
    return None


def chat_ref(chat_id: str) -> int | str:
    """Numeric chat ids go as integers, ``@channelname`` as a string."""
    stripped = chat_id.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    return stripped


def _bad_ids(*ids: str | None) -> SendResult | None:
    """Thread and message ids are integers on Telegram; anything else is refused unsent."""
    for value in ids:
        if value and not value.isdigit():
            return SendResult(
                SendOutcome.FAILED, error=f"{value!r} is not a Telegram thread or message id"
            )
    return None


@dataclass(frozen=True, slots=True)
class _Answer:
    """A decoded Bot API answer."""

    ok: bool
    result: Any = None
    error_code: int | None = None
    description: str = ""
    retry_after_s: float | None = None


class TelegramChannel(ChatChannel[TelegramConfig]):
    """Posts cards to chats and forum topics, edits them, answers button presses."""

    name = "telegram"
    idempotent_sends = False
    per_chat_rate = 1.0
    #: Telegram's bot limit: about 30 messages a second across all chats.
    global_rate: float | None = 30.0
    #: A group or channel takes 20 messages a minute: 20 at once, then one every 3 s.
    group_per_minute = 20

    def pace_key(self, target: Target) -> str:
        """One row per chat: Telegram counts the posts to a chat's threads together."""
        return Target(self.name, target.chat_id).place

    def burst_paces(self, target: Target) -> dict[str, tuple[float, float]]:
        """A group or channel (negative id, ``@name``) has a row for its minute's allowance
        beside its 1 message/s: quick posts (a card and its edits) go at once."""
        if not (target.chat_id or "").startswith(("-", "@")):
            return {}
        gap = 60.0 / self.group_per_minute
        return {f"{self.pace_key(target)}*minute": (gap, gap * (self.group_per_minute - 1))}

    def __init__(self, config: TelegramConfig) -> None:
        super().__init__(config)
        self._username: str | None = None

    # -- the Channel interface ------------------------------------------------------------

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        """``sendMessage`` to ``target.chat_id`` (its forum topic, in reply to
        ``target.reply_to``); never raises."""
        refused = self._refuse_buttons(message) or _bad_ids(target.thread_id, target.reply_to)
        if refused is not None:
            return refused
        body = self._text_body(target.chat_id, message.text, target.thread_id)
        if message.buttons:
            body["reply_markup"] = keyboard(message.buttons)
        if target.reply_to:
            # A note under its card; should the card be deleted, the note still goes out.
            body["reply_parameters"] = {
                "message_id": int(target.reply_to),
                "allow_sending_without_reply": True,
            }
        return await self._message_call("sendMessage", body, target)

    async def edit(self, target: Target, message: Message) -> SendResult:
        """``editMessageText`` with the new text and keyboard (empty: buttons removed)."""
        if not target.message_id:
            return SendResult(SendOutcome.FAILED, error="no message id to edit")
        refused = self._refuse_buttons(message) or _bad_ids(target.message_id)
        if refused is not None:
            return refused
        body: dict[str, Any] = {
            "chat_id": chat_ref(target.chat_id),
            "message_id": int(target.message_id),
            "text": fit(message.text or " ", TEXT_LIMIT),
            "reply_markup": keyboard(message.buttons),
        }
        result = await self._message_call("editMessageText", body, target)
        if result.outcome is SendOutcome.FAILED and NOT_MODIFIED in (result.error or ""):
            return SendResult(SendOutcome.SENT, message_id=target.message_id)
        if result.outcome is SendOutcome.SENT and result.message_id is None:
            return SendResult(SendOutcome.SENT, message_id=target.message_id)
        return result

    # -- helpers for the webhook --------------------------------------------------------------

    async def send_text(
        self,
        chat_id: str,
        text: str,
        thread_id: str | None = None,
        rows: Sequence[Sequence[Button]] = (),
    ) -> SendResult:
        """Text to a chat or topic (``/runs`` answers), cut to 4096 characters, with a
        keyboard row for each group of buttons in ``rows``."""
        flat = tuple(b for row in rows for b in row)
        refused = _bad_ids(thread_id) or self._refuse_buttons(Message(text, flat))
        if refused is not None:
            return refused
        body = self._text_body(chat_id, text, thread_id)
        if flat:
            body["reply_markup"] = rows_keyboard(rows)
        return await self._message_call("sendMessage", body, Target(self.name, chat_id, thread_id))

    async def answer_callback(
        self, callback_query_id: str, text: str, *, show_alert: bool = False
    ) -> SendResult:
        """``answerCallbackQuery``: the short answer shown to whoever pressed (200 characters)."""
        body: dict[str, Any] = {
            "callback_query_id": callback_query_id,
            "text": fit(text, CALLBACK_ANSWER_LIMIT),
        }
        if show_alert:
            body["show_alert"] = True
        answer = await self._call("answerCallbackQuery", body)
        if isinstance(answer, SendResult):
            return answer
        if answer.ok:
            return SendResult(SendOutcome.SENT)
        return self._failure(answer)

    async def username(self) -> str | None:
        """The bot's own username (``getMe``, asked once); ``None`` when it cannot be read."""
        if self._username is None:
            answer = await self._call("getMe", {})
            if isinstance(answer, _Answer) and answer.ok and isinstance(answer.result, dict):
                name = answer.result.get("username")
                self._username = str(name) if name else None
        return self._username

    # -- the wire -----------------------------------------------------------------------------

    def _refuse_buttons(self, message: Message) -> SendResult | None:
        button = oversized_button(message.buttons)
        if button is None:
            return None
        size = len(button.data.encode())
        return SendResult(
            SendOutcome.FAILED,
            error=f"button {button.label!r} carries {size} bytes of data; "
            f"Telegram allows {BUTTON_DATA_LIMIT}: not sent",
        )

    def _text_body(self, chat_id: str, text: str, thread_id: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"chat_id": chat_ref(chat_id), "text": fit(text or " ", TEXT_LIMIT)}
        if thread_id:
            body["message_thread_id"] = int(thread_id)
        return body

    async def _message_call(self, method: str, body: dict[str, Any], target: Target) -> SendResult:
        answer = await self._call(method, body)
        if isinstance(answer, SendResult):
            return answer
        if not answer.ok:
            result = self._failure(answer)
            level = logging.DEBUG if NOT_MODIFIED in answer.description else logging.WARNING
            log.log(
                level,
                "Telegram %s to %s: %s",
                method,
                target.place,
                result.error,
                extra={"action": "telegram_send"},
            )
            return result
        message_id = answer.result.get("message_id") if isinstance(answer.result, dict) else None
        if message_id is None and method == "sendMessage":
            return SendResult(
                SendOutcome.MAYBE_SENT, error="Telegram accepted the message without its id"
            )
        return SendResult(
            SendOutcome.SENT, message_id=None if message_id is None else str(message_id)
        )

    def _failure(self, answer: _Answer) -> SendResult:
        code = answer.error_code or 0
        reason = f"Telegram {code}: {answer.description or 'no description'}"
        if code == 429:
            return SendResult(SendOutcome.RETRY, error=reason, retry_after_s=answer.retry_after_s)
        if 400 <= code < 500:
            return SendResult(SendOutcome.FAILED, error=reason)
        return SendResult(SendOutcome.MAYBE_SENT, error=reason)

    async def _call(self, method: str, body: dict[str, Any]) -> _Answer | SendResult:
        """One Bot API call: a decoded answer, or the classified reason there is none."""
        unconfigured = self._unconfigured()
        if unconfigured is not None:
            return unconfigured
        response = await self._request("POST", f"{self.base_url}/bot{self._token}/{method}", body)
        if isinstance(response, SendResult):
            error = self._hide_token(response.error or "")
            log.warning("Telegram %s: %s", method, error, extra={"action": "telegram_send"})
            return SendResult(response.outcome, error=error)
        decoded = decoded_json(response)
        if not isinstance(decoded, dict) or "ok" not in decoded:
            if response.is_success:
                return SendResult(
                    SendOutcome.MAYBE_SENT,
                    error=f"Telegram answered HTTP {response.status_code} without a Bot API body",
                )
            result = classify_status(response)
            return SendResult(
                result.outcome,
                error=self._hide_token(result.error or ""),
                retry_after_s=result.retry_after_s,
            )
        if decoded["ok"] is True:
            return _Answer(True, decoded.get("result"))
        parameters = decoded.get("parameters") or {}
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        code = decoded.get("error_code")
        return _Answer(
            False,
            error_code=int(code) if isinstance(code, int) else response.status_code,
            description=self._hide_token(str(decoded.get("description") or "")),
            retry_after_s=float(retry_after) if isinstance(retry_after, int | float) else None,
        )

    def _hide_token(self, text: str) -> str:
        return text.replace(self._token, "<bot token>") if self._token else text
