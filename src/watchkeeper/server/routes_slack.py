"""Slack's request URLs: interactivity (button presses) and the ``/runs`` slash command.

Slack signs every request with the app's signing secret: ``X-Slack-Signature``
is ``v0=`` and the HMAC-SHA256 of ``v0:{X-Slack-Request-Timestamp}:{body}``.
A request that fails the check, or whose timestamp is more than five minutes
away, is answered 401 and changes nothing.

Slack wants an answer within three seconds, and a press may take longer (the
winner runs the kind's action). So a press is acknowledged at once with an
empty 200 and decided in a worker thread; a press that did not win, and a
diagnosis, is then answered to the presser only through the press's
``response_url``. The card is edited by the outbox (Slack keeps its buttons:
a later press is told who decided).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from slack_sdk.signature import Clock as SlackClock
from slack_sdk.signature import SignatureVerifier
from starlette.background import BackgroundTask

from watchkeeper.clock import Now
from watchkeeper.config import resolve_secret
from watchkeeper.errors import ConfigError
from watchkeeper.notify.channels.slack import ACTION_PREFIX, SlackChannel
from watchkeeper.notify.presses import ChatPress, decide_press
from watchkeeper.notify.runs_text import runs_text
from watchkeeper.runtime import Runtime
from watchkeeper.server.errors import error_response

log = logging.getLogger(__name__)

_OWN_CHANNEL = "slack_channel"


@contextlib.asynccontextmanager
async def _close_own_channel(app: FastAPI) -> AsyncIterator[None]:
    yield
    own = getattr(app.state, _OWN_CHANNEL, None)
    if isinstance(own, SlackChannel):
        await own.aclose()


router = APIRouter(tags=["webhooks"], lifespan=_close_own_channel)


class _RuntimeClock(SlackClock):
    """Slack's verifier reads the time through this: the runtime's clock, in epoch seconds."""

    def __init__(self, clock: Now) -> None:
        self._clock = clock

    def now(self) -> float:
        return self._clock().timestamp()


def verified(
    secret: str, body: bytes, timestamp: str | None, signature: str | None, clock: Now
) -> bool:
    """Whether Slack signed this body with ``secret`` less than five minutes ago."""
    if not timestamp or not timestamp.isdigit() or not signature:
        return False
    return SignatureVerifier(secret, clock=_RuntimeClock(clock)).is_valid(
        body, timestamp, signature
    )


def channel_of(app: FastAPI, runtime: Runtime) -> SlackChannel:
    """The app's Slack channel, or one built from the settings and kept on the app."""
    channels = getattr(app.state, "channels", None)
    if isinstance(channels, Mapping):
        shared = channels.get("slack")
        if isinstance(shared, SlackChannel):
            return shared
    own = getattr(app.state, _OWN_CHANNEL, None)
    if not isinstance(own, SlackChannel):
        own = SlackChannel(runtime.settings.slack)
        setattr(app.state, _OWN_CHANNEL, own)
    return own


async def _signed_form(request: Request, runtime: Runtime) -> dict[str, str] | Response:
    """The form fields of a request Slack signed, or the 401 to answer."""
    body = await request.body()
    config = runtime.settings.slack
    try:
        secret = resolve_secret(
            config.signing_secret, config.signing_secret_env, "slack.signing_secret"
        )
    except ConfigError as exc:
        log.error("Cannot check Slack requests: %s", exc, extra={"action": "slack_webhook"})
        secret = None
    headers = request.headers
    if not secret or not verified(
        secret,
        body,
        headers.get("X-Slack-Request-Timestamp"),
        headers.get("X-Slack-Signature"),
        runtime.clock,
    ):
        log.warning("Refused a Slack request: bad or stale signature",
                    extra={"action": "slack_webhook"})  # fmt: skip
        return error_response(401, "unauthorized", "invalid request signature")
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


@router.post("/webhooks/slack", include_in_schema=False)
async def slack_interactivity(request: Request) -> Response:
    """The interactivity request URL: ``payload=<json>``; button presses are acted on."""
    runtime: Runtime = request.app.state.runtime
    form = await _signed_form(request, runtime)
    if isinstance(form, Response):
        return form
    try:
        payload = json.loads(form.get("payload", ""))
    except ValueError:
        return error_response(400, "malformed_json", "the payload field is not valid JSON")
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        return Response(status_code=200)
    action = _our_action(payload)
    if action is None:
        return Response(status_code=200)
    user = payload.get("user")
    if not isinstance(user, Mapping):
        user = {}
    user_id = str(user.get("id") or "")
    seen = f"{_message_ts(payload)}:{action.get('action_ts', '')}:{user_id}"
    first = await asyncio.to_thread(runtime.store.outbox.first_time, "slack", seen, runtime.clock())
    if not first:
        log.info("Slack press %s seen before", seen, extra={"action": "slack_webhook"})
        return Response(status_code=200)
    name = str(user.get("username") or user.get("name") or user_id)
    press = ChatPress("slack", user_id, name, str(action.get("value") or ""))
    response_url = str(payload.get("response_url") or "")
    channel = channel_of(request.app, runtime)
    task = BackgroundTask(_decide_and_respond, runtime, channel, press, response_url)
    return Response(status_code=200, background=task)


def _our_action(payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    actions = payload.get("actions")
    if not isinstance(actions, list):
        return None
    for action in actions:
        if isinstance(action, Mapping) and str(action.get("action_id", "")).startswith(
            ACTION_PREFIX
        ):
            return action
    return None


def _message_ts(payload: Mapping[str, Any]) -> str:
    container = payload.get("container")
    if isinstance(container, Mapping) and container.get("message_ts"):
        return str(container["message_ts"])
    message = payload.get("message")
    if isinstance(message, Mapping):
        return str(message.get("ts") or "")
    return ""


async def _decide_and_respond(
    runtime: Runtime, channel: SlackChannel, press: ChatPress, response_url: str
) -> None:
    text = await decide_press(runtime.decider, press)
    if text is None:
        return
    if not response_url:
        log.warning("Cannot answer a Slack press: no response_url", extra={"action": "slack_press"})
        return
    await channel.respond(response_url, text)


@router.post("/webhooks/slack/commands", include_in_schema=False)
async def slack_commands(request: Request) -> Response:
    """The slash command request URL: ``/runs`` (``/runs all``), answered to the caller only."""
    runtime: Runtime = request.app.state.runtime
    form = await _signed_form(request, runtime)
    if isinstance(form, Response):
        return form
    command = form.get("command", "")
    if command != "/runs":
        text = f"unknown command {command}: watchkeeper knows /runs"
    else:
        text = await runs_text(runtime.overview, form.get("text", ""))
    return JSONResponse({"response_type": "ephemeral", "text": text})
