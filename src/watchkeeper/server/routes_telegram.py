"""``POST /webhooks/telegram``: button presses and ``/runs`` from Telegram.

Telegram posts one Update per request, with the secret given to ``setWebhook``
in ``X-Telegram-Bot-Api-Secret-Token``. Each ``update_id`` is handled once:
Telegram resends an update it thinks was not delivered, and a resend must not
answer a press twice. A press is decided in a worker thread (the winner runs
the kind's action, which may take seconds), then answered exactly once; the
card itself is edited by the outbox from the decision's event.
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

from watchkeeper.decide.decider import Outcome
from watchkeeper.errors import Unauthorized
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.presses import NOT_OURS, ChatPress, answer_press
from watchkeeper.server.chat_webhooks import (
    AnsweringChannel,
    answer_runs,
    press_while_down,
    seen_before,
)
from watchkeeper.server.deps import Services, services
from watchkeeper.server.errors import error_response

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name
__all__ = ["NOT_OURS", "router", "telegram_webhook"]
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


class _CallbackQuery(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str
    from_user: _User = Field(alias="from")
    data: str | None = None


class _Update(BaseModel):
    model_config = ConfigDict(extra="ignore")

    update_id: int
    message: _Message | None = None
    callback_query: _CallbackQuery | None = None


def _json(status: int, body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, status_code=status)


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
        await _press(request, found, update.callback_query)
    elif update.message is not None and update.message.text:
        await _command(request, found, update.message)
    return _json(200, {"ok": True})


async def _press(request: Request, found: Services, query: _CallbackQuery) -> None:
    """Decide the press, then answer it exactly once: an alert when it was refused."""
    user = query.from_user
    press = ChatPress("telegram", str(user.id), user.username or user.first_name, query.data or "")
    answer = await answer_press(found.decider, press, press_while_down(found))
    result = answer.result
    alert = result is not None and not result.won and result.outcome is not Outcome.DIAGNOSED
    sent = await answering.of(request).answer_callback(query.id, answer.text, show_alert=alert)
    if sent.error:
        log.warning(
            "Telegram press not answered: %s", sent.error, extra={"action": "telegram_press"}
        )


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
    text = await answer_runs(found, runs.group("argument") or "")
    thread = message.message_thread_id if message.is_topic_message else None
    sent = await channel.send_text(
        str(message.chat.id), text, None if thread is None else str(thread)
    )
    if sent.error:
        log.warning(
            "Telegram /runs answer not sent: %s", sent.error, extra={"action": "telegram_runs"}
        )
