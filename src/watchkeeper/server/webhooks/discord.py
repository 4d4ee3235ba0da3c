"""Discord's interactions endpoint: button presses and the ``/runs`` command.

Discord signs every interaction with the application's Ed25519 key: the
signature (``X-Signature-Ed25519``) covers the timestamp
(``X-Signature-Timestamp``) followed by the raw body. A request that fails
the check, or whose timestamp is more than five minutes away, is answered 401
and changes nothing.

Discord wants an answer within three seconds, and a press may take longer
(the winner runs the kind's action). So a press is acknowledged at once with
``DEFERRED_UPDATE_MESSAGE`` and decided in a worker thread; a press that did
not win is then told why in an ephemeral follow-up. The card itself is edited
by the outbox, from the incident's ``decided`` event.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from nacl.exceptions import CryptoError
from nacl.signing import VerifyKey

from watchkeeper.errors import Unauthorized
from watchkeeper.notify.channels.discord import (
    EPHEMERAL,
    MAX_ROWS,
    DiscordChannel,
    fit,
    runs_components,
)
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

#: Interaction types.
PING, APPLICATION_COMMAND, MESSAGE_COMPONENT = 1, 2, 3
#: Interaction callback types.
PONG, CHANNEL_MESSAGE, DEFERRED_CHANNEL_MESSAGE, DEFERRED_UPDATE = 1, 4, 5, 6
#: A signed request older (or newer) than this is refused: a replay, or a clock far off.
MAX_AGE_S = 300
#: The channel follow-ups go through.
answering = AnsweringChannel(DiscordChannel, lambda settings: DiscordChannel(settings.discord))
router = APIRouter(tags=["webhooks"], lifespan=answering.lifespan)


def verified(
    public_key: str | None,
    signature: str | None,
    timestamp: str | None,
    body: bytes,
    now: float,
) -> bool:
    """Whether Discord signed ``timestamp + body`` with ``public_key``, less than 5 minutes ago."""
    if not public_key or not signature or not timestamp or not timestamp.isdigit():
        return False
    if abs(now - int(timestamp)) > MAX_AGE_S:
        return False
    try:
        key = VerifyKey(bytes.fromhex(public_key))
        key.verify(timestamp.encode() + body, bytes.fromhex(signature))
    except (CryptoError, ValueError, TypeError):
        return False
    return True


def _presser(interaction: Mapping[str, Any]) -> tuple[str, str]:
    """The user's id and name: ``member.user`` in a server, ``user`` in a direct message."""
    member = interaction.get("member")
    user = member.get("user") if isinstance(member, Mapping) else None
    if not isinstance(user, Mapping):
        user = interaction.get("user")
    if not isinstance(user, Mapping):
        return "", "unknown"
    user_id = str(user.get("id") or "")
    return user_id, str(user.get("username") or user.get("global_name") or user_id)


def _ephemeral(text: str) -> JSONResponse:
    return JSONResponse(
        {"type": CHANNEL_MESSAGE, "data": {"content": fit(text), "flags": EPHEMERAL}}
    )


@router.post("/webhooks/discord", include_in_schema=False)
async def discord_interactions(request: Request) -> Response:
    """The interactions endpoint URL of the Discord application."""
    found = services(request)
    body = await request.body()
    headers = request.headers
    if not verified(
        found.settings.discord.public_key,
        headers.get("X-Signature-Ed25519"),
        headers.get("X-Signature-Timestamp"),
        body,
        found.clock().timestamp(),
    ):
        log.warning(
            "Refused a Discord interaction: bad or stale signature",
            extra={"action": "discord_webhook"},
        )
        raise Unauthorized("invalid request signature")
    try:
        interaction = json.loads(body)
    except ValueError:
        return error_response(400, "malformed_json", "the body is not valid JSON")
    if not isinstance(interaction, dict):
        return error_response(400, "invalid", "an interaction is a JSON object")
    kind = interaction.get("type")
    if kind == PING:
        return JSONResponse({"type": PONG})
    interaction_id = str(interaction.get("id") or "")
    if not interaction_id:
        return error_response(400, "invalid", "the interaction has no id")
    if await seen_before(request, "discord", interaction_id):
        duplicate = DEFERRED_UPDATE if kind == MESSAGE_COMPONENT else DEFERRED_CHANNEL_MESSAGE
        return JSONResponse({"type": duplicate})
    if kind == MESSAGE_COMPONENT:
        return _press(request, found, interaction)
    if kind == APPLICATION_COMMAND:
        return await _command(found, interaction)
    return _ephemeral("watchkeeper answers buttons and /runs only")


def _press(request: Request, found: Services, interaction: dict[str, Any]) -> Response:
    """Acknowledge now (no visible change); decide in a thread; follow up if it did not win."""
    data = interaction.get("data")
    custom_id = str(data.get("custom_id") or "") if isinstance(data, Mapping) else ""
    user_id, user_name = _presser(interaction)
    press = ChatPress("discord", user_id, user_name, custom_id)
    application_id = found.settings.discord.application_id or str(
        interaction.get("application_id") or ""
    )
    token = str(interaction.get("token") or "")
    follow_up = answering.of(request).followup
    tell = partial(follow_up, application_id, token) if application_id and token else None
    # A card is never ephemeral; a /runs answer always is, and no card will say what came of it.
    message = interaction.get("message")
    flags = message.get("flags") if isinstance(message, Mapping) else None
    ephemeral = isinstance(flags, int) and bool(flags & EPHEMERAL)
    task = decided_later(
        found, press, tell, "application id or interaction token", tell_won=ephemeral
    )
    return JSONResponse({"type": DEFERRED_UPDATE}, background=task)


async def _command(found: Services, interaction: dict[str, Any]) -> Response:
    """``/runs`` (with the option ``all`` for finished work too), answered to the caller only."""
    data = interaction.get("data")
    if not isinstance(data, Mapping) or data.get("name") != "runs":
        return _ephemeral("unknown command: watchkeeper knows /runs")
    options = data.get("options")
    include = isinstance(options, list) and any(
        isinstance(o, Mapping)
        and (
            (o.get("name") == "all" and o.get("value") not in (False, None, "", "false"))
            or o.get("value") == "all"
        )
        for o in options
    )
    answer = await answer_runs(found, "all" if include else "")
    shown = min(len(answer.pressable), MAX_ROWS)
    reply: dict[str, Any] = {"content": fit(answer.text(shown)), "flags": EPHEMERAL}
    if shown:
        reply["components"] = runs_components([item.buttons for item in answer.pressable[:shown]])
    return JSONResponse({"type": CHANNEL_MESSAGE, "data": reply})
