"""``POST /webhooks/telegram``: button presses and ``/runs`` from Telegram.

Telegram posts one Update per request, with the secret given to ``setWebhook``
in ``X-Telegram-Bot-Api-Secret-Token``. Each ``update_id`` is handled once:
Telegram resends an update it thinks was not delivered, and a resend must not
answer a press twice.

A press is answered 200 at once and decided after the answer, as Slack and
Discord presses are: the winner runs the kind's action, which may take as long
as the action's ``timeout_s``, and Telegram resends an update whose request
takes too long. The callback query is answered first, with :data:`WORKING`
(Telegram wants it answered promptly, and only once). Then the outcome: a
press that won is told by its card, which the outbox edits from the decision
(and, should the action fail, by the note it posts under the card); a
diagnosis is posted under the card by the outbox too; any other press (refused,
late, stale, not decided) is answered with a reply under the card, naming the
presser. Like Slack's and Discord's, the work after the answer is the
response's background task, which the server waits for when it stops cleanly.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.background import BackgroundTask

from watchkeeper.decide.decider import Outcome
from watchkeeper.errors import Unauthorized
from watchkeeper.notify.channels.telegram import RUNS_ITEMS, TelegramChannel
from watchkeeper.notify.message import Message, Target
from watchkeeper.notify.presses import NOT_OURS, ChatPress, PressAnswer, answer_press
from watchkeeper.notify.runs_text import from_runs
from watchkeeper.server.deps import Services, services
from watchkeeper.server.http.errors import error_response
from watchkeeper.server.webhooks.chat import (
    AnsweringChannel,
    answer_runs,
    press_while_down,
    seen_before,
)

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name
#: The callback query's answer, given before the press is decided.
WORKING = "Working on it: the outcome will show in this chat"
__all__ = ["NOT_OURS", "WORKING", "router", "telegram_webhook"]
_RUNS = re.compile(r"^/runs(?:@(?P<bot>[A-Za-z0-9_]+))?(?:\s+(?P<argument>.*))?$", re.S)

#: The channel presses and ``/runs`` are answered through.
answering = AnsweringChannel(TelegramChannel, lambda settings: TelegramChannel(settings.telegram))
router = APIRouter(tags=["webhooks"], lifespan=answering.lifespan)


class _User(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int
    username: str | None = None
    first_name: str = ""


class _Chat(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message_id: int
    chat: _Chat
    message_thread_id: int | None = None
    is_topic_message: bool | None = None
    text: str | None = None
    #: The keyboard of the message pressed: a card's, or a ``/runs`` answer's.
    reply_markup: dict[str, Any] | None = None

    def labels(self) -> list[str]:
        """The words on the message's buttons."""
        rows = (self.reply_markup or {}).get("inline_keyboard")
        if not isinstance(rows, list):
            return []
        return [
            str(button.get("text", ""))
            for row in rows
            if isinstance(row, list)
            for button in row
            if isinstance(button, dict)
        ]


class _CallbackQuery(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str
    from_user: _User = Field(alias="from")
    #: The card pressed (absent for messages sent in inline mode, which cards never are).
    message: _Message | None = None
    data: str | None = None


class _Update(BaseModel):
    model_config = ConfigDict(extra="ignore")

    update_id: int
    message: _Message | None = None
    callback_query: _CallbackQuery | None = None


def _json(
    status: int, body: dict[str, Any], background: BackgroundTask | None = None
) -> JSONResponse:
    return JSONResponse(body, status_code=status, background=background)


@router.post("/webhooks/telegram", include_in_schema=False)
async def telegram_webhook(request: Request) -> JSONResponse:
    """One Update from Telegram: a button press, ``/runs``, or something ignored."""
    found = services(request)
    secret = found.settings.telegram.webhook_secret
    if not secret:
        return error_response(404, "not_found", "telegram is not configured")
    given = request.headers.get(SECRET_HEADER, "")
    if not hmac.compare_digest(given.encode(), secret.encode()):
        log.warning(
            "Telegram webhook refused: %s secret token",
            "wrong" if given else "no",
            extra={"action": "telegram_webhook"},
        )
        raise Unauthorized(f"missing or wrong {SECRET_HEADER}: this is not Telegram")
    try:
        raw = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError) as exc:
        return error_response(400, "malformed_json", f"the body is not valid JSON: {exc}")
    try:
        update = _Update.model_validate(raw)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "body"
        return error_response(400, "invalid", f"not a Telegram update: {where}: {problem['msg']}")
    if await seen_before(request, "telegram", str(update.update_id)):
        return _json(200, {"ok": True, "duplicate": True})
    if update.callback_query is not None:
        later = BackgroundTask(_press, answering.of(request), found, update.callback_query)
        return _json(200, {"ok": True}, later)
    if update.message is not None and update.message.text:
        await _command(request, found, update.message)
    return _json(200, {"ok": True})


async def _press(channel: TelegramChannel, found: Services, query: _CallbackQuery) -> None:
    """Answer the callback query at once, decide the press, then tell its outcome if the
    card will not."""
    sent = await channel.answer_callback(query.id, WORKING)
    if sent.error:
        log.warning(
            "Telegram press not answered: %s", sent.error, extra={"action": "telegram_press"}
        )
    user = query.from_user
    press = ChatPress("telegram", str(user.id), user.username or user.first_name, query.data or "")
    answer = await answer_press(found.decider, press, press_while_down(found))
    card = query.message
    text = answer.text
    if _card_tells(answer):
        assert answer.result is not None
        if card is None or not from_runs(card.labels()):
            return
        # Pressed on a /runs answer: no card will say what came of it.
        text = f"incident {answer.result.incident_id}: {text}"
    if card is None:
        log.warning(
            "Cannot tell a Telegram press's outcome: the update names no message",
            extra={"action": "telegram_press"},
        )
        return
    thread = card.message_thread_id if card.is_topic_message else None
    under = Target(
        "telegram",
        str(card.chat.id),
        None if thread is None else str(thread),
        reply_to=str(card.message_id),
    )
    presser = f"@{user.username}" if user.username else (user.first_name or f"user {user.id}")
    sent = await channel.send(under, Message(f"{presser}: {text}"), f"press-{query.id}")
    if sent.error:
        log.warning(
            "Telegram press's outcome not told: %s", sent.error, extra={"action": "telegram_press"}
        )


def _card_tells(answer: PressAnswer) -> bool:
    """Whether the outbox tells this outcome under or on the card: a decision edits the card
    (a failed action adds a note), a diagnosis is posted under it."""
    result = answer.result
    return result is not None and (result.won or result.outcome is Outcome.DIAGNOSED)


async def _command(request: Request, found: Services, message: _Message) -> None:
    """``/runs`` and ``/runs all`` (also ``/runs@thisbot``), answered in the same topic."""
    runs = _RUNS.match((message.text or "").strip())
    if runs is None:
        return
    channel = answering.of(request)
    addressed = runs.group("bot")
    if addressed:
        mine = await channel.username()
        if mine is not None and addressed.lower() != mine.lower():
            return  # another bot's /runs
    answer = await answer_runs(found, runs.group("argument") or "")
    shown = min(len(answer.pressable), RUNS_ITEMS)
    thread = message.message_thread_id if message.is_topic_message else None
    sent = await channel.send_text(
        str(message.chat.id),
        answer.text(shown),
        None if thread is None else str(thread),
        [item.buttons for item in answer.pressable[:shown]],
    )
    if sent.error:
        log.warning(
            "Telegram /runs answer not sent: %s", sent.error, extra={"action": "telegram_runs"}
        )
