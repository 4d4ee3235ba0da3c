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

import json
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from slack_sdk.signature import Clock as SlackClock
from slack_sdk.signature import SignatureVerifier

from watchkeeper.clock import Now
from watchkeeper.config import resolve_secret
from watchkeeper.errors import ConfigError, Unauthorized
from watchkeeper.notify.channels.slack import ACTION_PREFIX, SlackChannel, runs_reply
from watchkeeper.notify.presses import ChatPress
from watchkeeper.server.deps import Services, services
from watchkeeper.server.http.errors import error_response
from watchkeeper.server.webhooks.chat import (
    AnsweringChannel,
    answer_runs,
    decided_later,
    seen_before,
)

log = logging.getLogger(__name__)

#: The channel presses are answered through.
answering = AnsweringChannel(SlackChannel, lambda settings: SlackChannel(settings.slack))
router = APIRouter(tags=["webhooks"], lifespan=answering.lifespan)


class _AppClock(SlackClock):
    """Slack's verifier reads the time through this: the app's clock, in epoch seconds."""

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
    return SignatureVerifier(secret, clock=_AppClock(clock)).is_valid(body, timestamp, signature)


async def _signed_form(request: Request) -> tuple[Services, dict[str, str]]:
    """The services and the form fields of a request Slack signed; 401 for any other."""
    found = services(request)
    body = await request.body()
    config = found.settings.slack
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
        found.clock,
    ):
        log.warning(
            "Refused a Slack request: bad or stale signature", extra={"action": "slack_webhook"}
        )
        raise Unauthorized("invalid request signature")
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return found, {name: values[0] for name, values in fields.items()}


@router.post("/webhooks/slack", include_in_schema=False)
async def slack_interactivity(request: Request) -> Response:
    """The interactivity request URL: ``payload=<json>``; button presses are acted on."""
    found, form = await _signed_form(request)
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
    if await seen_before(request, "slack", seen):
        return Response(status_code=200)
    name = str(user.get("username") or user.get("name") or user_id)
    press = ChatPress("slack", user_id, name, str(action.get("value") or ""))
    response_url = str(payload.get("response_url") or "")
    tell = partial(answering.of(request).respond, response_url) if response_url else None
    # A card is never ephemeral; a /runs answer always is, and no card will say what came of it.
    task = decided_later(found, press, tell, "response_url", tell_won=_ephemeral(payload))
    return Response(status_code=200, background=task)


def _ephemeral(payload: Mapping[str, Any]) -> bool:
    container = payload.get("container")
    return isinstance(container, Mapping) and container.get("is_ephemeral") is True


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


@router.post("/webhooks/slack/commands", include_in_schema=False)
async def slack_commands(request: Request) -> Response:
    """The slash command request URL: ``/runs`` (``/runs all``), answered to the caller only."""
    found, form = await _signed_form(request)
    command = form.get("command", "")
    if command != "/runs":
        text = f"unknown command {command}: watchkeeper knows /runs"
        return JSONResponse({"response_type": "ephemeral", "text": text})
    answer = await answer_runs(found, form.get("text", ""))
    items = [(item.line, item.buttons) for item in answer.pressable]
    return JSONResponse(runs_reply(answer.text, items))
