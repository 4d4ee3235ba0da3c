"""``POST /webhooks/telegram``: button presses and ``/runs`` from Telegram.

Telegram posts one Update per request, with the secret given to ``setWebhook``
in ``X-Telegram-Bot-Api-Secret-Token``. Each ``update_id`` is handled once:
Telegram resends an update it thinks was not delivered, and a resend must not
answer a press twice. A press is decided in a worker thread (the winner runs
the kind's action, which may take seconds), then answered exactly once; the
card itself is edited by the outbox from the decision's event.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from watchkeeper.decide.decider import Outcome, PressResult
from watchkeeper.errors import StoreUnavailable, WatchkeeperError
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.presses import ChatPress, handle_chat_press
from watchkeeper.notify.runs_text import runs_text
from watchkeeper.runtime import Runtime
from watchkeeper.server.errors import error_response

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name
NOT_OURS = "not a watchkeeper button"
_RUNS = re.compile(r"^/runs(?:@(?P<bot>[A-Za-z0-9_]+))?(?:\s+(?P<argument>.*))?$", re.S)
_LAZY_CHANNEL = "telegram_channel"


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Close the channel this router built for itself, if it built one."""
    try:
        yield
    finally:
        channel = getattr(app.state, _LAZY_CHANNEL, None)
        if channel is not None:
            await channel.aclose()
            setattr(app.state, _LAZY_CHANNEL, None)


router = APIRouter(tags=["webhooks"], lifespan=_lifespan)


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


def channel_of(request: Request) -> TelegramChannel:
    """The notifier's Telegram channel, or one of this router's own, built once."""
    state = request.app.state
    channels: dict[str, Any] | None = getattr(state, "channels", None)
    if channels is not None and isinstance(channels.get("telegram"), TelegramChannel):
        found: TelegramChannel = channels["telegram"]
        return found
    own: TelegramChannel | None = getattr(state, _LAZY_CHANNEL, None)
    if own is None:
        runtime: Runtime = state.runtime
        own = TelegramChannel(runtime.settings.telegram)
        setattr(state, _LAZY_CHANNEL, own)
    return own


def _json(status: int, body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, status_code=status)


@router.post("/webhooks/telegram", include_in_schema=False)
async def telegram_webhook(request: Request) -> JSONResponse:
    """One Update from Telegram: a button press, ``/runs``, or something ignored."""
    runtime: Runtime = request.app.state.runtime
    secret = runtime.settings.telegram.webhook_secret
    if not secret:
        return error_response(404, "not_found", "telegram is not configured")
    given = request.headers.get(SECRET_HEADER, "")
    if not hmac.compare_digest(given.encode(), secret.encode()):
        log.warning(
            "Telegram webhook refused: %s secret token",
            "wrong" if given else "no",
            extra={"action": "telegram_webhook"},
        )
        return error_response(
            401, "unauthorized", f"missing or wrong {SECRET_HEADER}: this is not Telegram"
        )
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
    first = await run_in_threadpool(
        runtime.store.outbox.first_time, "telegram", str(update.update_id), runtime.clock()
    )
    if not first:
        log.info(
            "Telegram update %d seen before: ignored",
            update.update_id,
            extra={"action": "telegram_webhook"},
        )
        return _json(200, {"ok": True, "duplicate": True})
    if update.callback_query is not None:
        await _press(request, runtime, update.callback_query)
    elif update.message is not None and update.message.text:
        await _command(request, runtime, update.message)
    return _json(200, {"ok": True})


async def _press(request: Request, runtime: Runtime, query: _CallbackQuery) -> None:
    """Decide the press off the event loop, then answer it exactly once."""
    user = query.from_user
    press = ChatPress("telegram", str(user.id), user.username or user.first_name, query.data or "")
    result: PressResult | None = None
    try:
        result = await run_in_threadpool(handle_chat_press, runtime.decider, press)
        answer = NOT_OURS if result is None else result.message
    except StoreUnavailable as exc:
        answer = f"could not act now: {exc}; press again in a moment"
        log.warning("Telegram press not decided: %s", exc, extra={"action": "telegram_press"})
    except WatchkeeperError as exc:
        answer = f"could not act: {exc}"
        log.warning("Telegram press not decided: %s", exc, extra={"action": "telegram_press"})
    except Exception:  # the presser is answered whatever went wrong; logged with its trace
        answer = "could not act: an unexpected error happened; it has been logged"
        log.exception("Telegram press failed", extra={"action": "telegram_press"})
    if result is not None:
        log.info(
            "Telegram press by %s on incident %d: %s",
            user.id,
            result.incident_id,
            result.outcome.value,
            extra={"action": "telegram_press"},
        )
    alert = result is not None and not result.won and result.outcome is not Outcome.DIAGNOSED
    sent = await channel_of(request).answer_callback(query.id, answer, show_alert=alert)
    if sent.error:
        log.warning(
            "Telegram press not answered: %s", sent.error, extra={"action": "telegram_press"}
        )


async def _command(request: Request, runtime: Runtime, message: _Message) -> None:
    """``/runs`` and ``/runs all`` (also ``/runs@thisbot``), answered in the same topic."""
    found = _RUNS.match((message.text or "").strip())
    if found is None:
        return
    channel = channel_of(request)
    addressed = found.group("bot")
    if addressed:
        mine = await channel.username()
        if mine is not None and addressed.lower() != mine.lower():
            return  # another bot's /runs
    text = await runs_text(runtime.overview, found.group("argument") or "")
    thread = message.message_thread_id if message.is_topic_message else None
    sent = await channel.send_text(
        str(message.chat.id), text, None if thread is None else str(thread)
    )
    if sent.error:
        log.warning(
            "Telegram /runs answer not sent: %s", sent.error, extra={"action": "telegram_runs"}
        )
