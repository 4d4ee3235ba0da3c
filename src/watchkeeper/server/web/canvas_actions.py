"""The supervision canvas's own reads and actions, for a dashboard session.

``GET /web/canvas.json`` is ``/web/supervision.json`` with the process runs as cards
(each probed for liveness as it is read) and the health endpoint. Every post is an
admin's, with the session's CSRF token, and answers JSON ``{ok, message}``: 4xx with
the reason when refused or malformed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from watchkeeper.errors import Conflict, InvalidInput, NotFound
from watchkeeper.server.deps import services
from watchkeeper.server.supervision import ServerSupervision
from watchkeeper.server.web import canvas_notify, canvas_service
from watchkeeper.server.web.session import Session, check_csrf, session
from watchkeeper.supervise import Strategy, SuperviseError

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)
#: A group's name, as ``[groups.NAME]`` allows it.
GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
#: A post's body: small JSON or a form.
MAX_BODY = 4096


class BadInput(InvalidInput):
    """A post whose body does not say what to do (answered 400)."""


def _supervision(request: Request) -> ServerSupervision:
    found: ServerSupervision = request.app.state.supervision
    return found


@router.get("/web/canvas.json")
async def canvas_json(request: Request, _current: Session = Depends(session)) -> JSONResponse:
    """The tree, its breakers and checks, the runs as cards and the health endpoint."""
    found = await asyncio.to_thread(
        canvas_service.snapshot, services(request), _supervision(request)
    )
    return JSONResponse(found, headers={"Cache-Control": "no-store"})


async def _body(request: Request, current: Session) -> dict[str, Any]:
    """The post's fields (JSON or a form), after its CSRF token is checked."""
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise BadInput(f"the body is larger than {MAX_BODY} bytes")
    fields: dict[str, Any] = {}
    if "json" in request.headers.get("content-type", ""):
        # The token rides in the header: refused before the body is read at all.
        check_csrf(request, current, {})
        try:
            fields = json.loads(raw or b"{}")
        except ValueError as exc:
            raise BadInput(f"the body is not JSON: {exc}") from None
        if not isinstance(fields, dict):
            raise BadInput("the body must be a JSON object")
        return fields
    fields = dict(parse_qsl(raw.decode("utf-8", "replace")))
    check_csrf(request, current, fields)
    return fields


def _refused(message: str, status: int) -> JSONResponse:
    return JSONResponse({"ok": False, "message": message}, status_code=status)


async def _act(
    request: Request,
    current: Session,
    what: str,
    act: Callable[[dict[str, Any]], Awaitable[tuple[str, dict[str, Any]]]],
) -> Response:
    """An admin's action from the canvas: the CSRF token checked, then ``act`` on the body."""
    try:
        fields = await _body(request, current)
    except BadInput as exc:
        return _refused(str(exc), 400)
    if not current.is_admin:
        return _refused(f"only admins {what}: @{current.name} is not", 403)
    try:
        message, extra = await act(fields)
    except BadInput as exc:
        return _refused(str(exc), 400)
    except NotFound as exc:
        return _refused(str(exc), 404)
    except (Conflict, SuperviseError) as exc:
        return _refused(str(exc), 409)
    log.info(
        "Canvas action by @%s: %s",
        current.name,
        message,
        extra={"action": "web_canvas"},
    )
    return JSONResponse({"ok": True, "message": message, **extra})


def _text(fields: dict[str, Any], name: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{name!r} is required: a non-empty string")
    return value.strip()


def _flag(fields: dict[str, Any], name: str) -> bool:
    value = fields.get(name)
    if value is True or value is False:
        return bool(value)
    if value in ("true", "false"):
        return str(value) == "true"
    raise BadInput(f"{name!r} is required: true or false")


@router.post("/web/canvas/runs")
async def start_run(request: Request, current: Session = Depends(session)) -> Response:
    """Start a program's command as a process run with a fresh id (a new card)."""

    async def act(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        program = _text(fields, "program")
        host = _supervision(request).programs
        run = await asyncio.to_thread(canvas_service.start_run, services(request), host, program)
        return f"run {run.run_id} of {program} started", {"run_id": run.run_id}

    return await _act(request, current, "start runs", act)


@router.post("/web/canvas/runs/{run_id}/reclaim")
async def reclaim_run(
    request: Request, run_id: str, current: Session = Depends(session)
) -> Response:
    """Reclaim a stale run: its record settled, what is left of it ended."""

    async def act(_fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        message = await asyncio.to_thread(canvas_service.reclaim, services(request), run_id)
        return message, {"run_id": run_id}

    return await _act(request, current, "reclaim runs", act)


@router.post("/web/canvas/breakers/{name}/probe")
async def probe_breaker(
    request: Request, name: str, current: Session = Depends(session)
) -> Response:
    """Send the one probe a breaker due for it lets through (its channel's test card)."""

    async def act(_fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        channels = request.app.state.channels
        ops = list(services(request).settings.ops.channels)
        message = await canvas_service.probe_breaker(_supervision(request), channels, ops, name)
        return message, {"breaker": name}

    return await _act(request, current, "probe breakers", act)


@router.post("/web/canvas/groups")
async def build_group(request: Request, current: Session = Depends(session)) -> Response:
    """Make a group (``name``) of programs that run alone (``programs``)."""

    async def act(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        name = _text(fields, "name")
        if not GROUP_NAME.fullmatch(name):
            raise BadInput(f"{name!r} is not a group name: letters, digits, '_', '.' and '-'")
        members = fields.get("programs")
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise BadInput("'programs' is required: a list of program names")
        message = await _supervision(request).programs.build_group(name, members)
        return message, {"group": name}

    return await _act(request, current, "build groups", act)


@router.post("/web/canvas/health-flag")
async def health_flag(request: Request, current: Session = Depends(session)) -> Response:
    """Switch the health monitor's flag on or off (``healthy``: true or false)."""

    async def act(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        healthy = _flag(fields, "healthy")
        reason = str(fields.get("reason") or "")[:200]
        message = canvas_service.set_flag(_supervision(request), healthy, reason)
        return message, {"healthy": healthy}

    return await _act(request, current, "switch the healthy flag", act)


@router.post("/web/canvas/host-checks/{name}/floor")
async def host_check_floor(
    request: Request, name: str, current: Session = Depends(session)
) -> Response:
    """Move a host check's floor (``mb``): the memory or free space it fails below."""

    async def act(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        value = fields.get("mb")
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise BadInput("'mb' is required: a number of megabytes")
        try:
            mb = float(value)
            message = await canvas_service.set_floor(_supervision(request), name, mb)
        except ValueError as exc:
            raise BadInput(f"'mb' must be a number of megabytes: {exc}") from None
        return message, {"mb": mb}

    return await _act(request, current, "change host checks", act)


@router.post("/web/canvas/supervisors/{node:path}/strategy")
async def strategy(request: Request, node: str, current: Session = Depends(session)) -> Response:
    """Give a supervisor (the server's tree or a program group) another strategy."""

    async def act(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        name = _text(fields, "strategy")
        try:
            chosen = Strategy(name)
        except ValueError:
            known = ", ".join(s.value for s in Strategy)
            raise BadInput(f"{name!r} is not a strategy: {known}") from None
        message = canvas_service.switch_strategy(_supervision(request), node, chosen)
        return message, {"strategy": chosen.value}

    return await _act(request, current, "switch strategies", act)


@router.post("/web/canvas/programs/{name}/notify")
async def route_notices(
    request: Request, name: str, current: Session = Depends(session)
) -> Response:
    """Send a program's notices where a supervisor (``to``: a group, or a tree's root for
    the ops channels) sends its own, in the running configuration."""

    async def act(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        node = _text(fields, "to")
        message = await canvas_notify.route_notices(_supervision(request), name, node)
        place, set_by = _supervision(request).programs.notify_of(name)
        return message, {"program": name, "notify": {"to": place, "set_by": set_by}}

    return await _act(request, current, "route notices", act)
