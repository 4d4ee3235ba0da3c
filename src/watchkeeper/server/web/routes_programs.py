"""The programs pages: every program the server keeps running, and a page per program with its
restarts, its health and its log following live; admins start, stop and restart them.

The pages read the programs on the event loop (where they change), and redraw their live
part on the stream's ``supervision`` event, which fires when a program starts, stops,
restarts or pauses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from watchkeeper.errors import Conflict, NotFound
from watchkeeper.programs import view
from watchkeeper.programs.host import ProgramHost
from watchkeeper.programs.output import read_log
from watchkeeper.server.api.events import stopping_of
from watchkeeper.server.api.fields import INT64_MAX
from watchkeeper.server.deps import services
from watchkeeper.server.http.longpoll import held_stream, sse_event, unless_set
from watchkeeper.server.web import charts
from watchkeeper.server.web.common import acting_form, answer, local_path, page
from watchkeeper.server.web.routes_home import chrome, missing_page, page_session
from watchkeeper.server.web.session import Session, session
from watchkeeper.server.web.stream import STREAM_S

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)
#: How much of a log the page shows at first; the rest follows live.
LOG_TAIL_BYTES = 64 * 1024
LOG_POLL_S = 0.5
_DIAL = {"healthy": 1.0, "degraded": 0.55, "unhealthy": 0.15}
_ACTIONS = ("start", "stop", "restart")


def _host(request: Request) -> ProgramHost:
    return services(request).programs


def _list_context(request: Request) -> dict[str, Any]:
    status = view.status(_host(request))
    for check in status["host_checks"]:
        check["dial"] = charts.dial(_DIAL.get(check["status"], 0.0))
    return {"status": status}


def _program_context(request: Request, name: str) -> dict[str, Any]:
    host = _host(request)
    _group, state = host.find(name)
    if state is None:
        raise NotFound(f"{name} is a group: its programs are listed on the programs page")
    shown = view.program(host, name)
    group = next(g for g in view.status(host)["groups"] if g["name"] == state.plan.group)
    return {"program": shown, "group": group}


@router.get("/web/programs", response_class=HTMLResponse)
async def programs_page(request: Request, current: Session = Depends(page_session)) -> HTMLResponse:
    """Every program of this host, its groups, and the host checks that pause starts."""
    return page(
        request,
        "programs.html",
        current,
        **_list_context(request),
        **await chrome(request),
        title="Programs",
    )


@router.get("/web/fragments/programs", response_class=HTMLResponse)
async def programs_fragment(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """The programs list alone, for live updates."""
    return page(request, "_programs.html", current, **_list_context(request))


@router.get("/web/programs/{name}", response_class=HTMLResponse)
async def program_page(
    request: Request, name: str, current: Session = Depends(page_session)
) -> HTMLResponse:
    """One program: its state, restarts and history, health checks, and its log (live)."""
    try:
        context = _program_context(request, name)
    except (NotFound, Conflict) as exc:
        return await missing_page(request, current, str(exc))
    piece = read_log(_host(request).programs[name].log.path, None, LOG_TAIL_BYTES)
    return page(
        request,
        "program.html",
        current,
        **context,
        log=piece.text,
        log_offset=piece.next_offset,
        **await chrome(request),
        title=f"Program {name}",
    )


@router.get("/web/fragments/programs/{name}", response_class=HTMLResponse)
async def program_fragment(
    request: Request, name: str, current: Session = Depends(session)
) -> HTMLResponse:
    """One program's state and history alone, for live updates."""
    try:
        context = _program_context(request, name)
    except (NotFound, Conflict) as exc:
        return await missing_page(request, current, str(exc))
    return page(request, "_program.html", current, **context)


@router.get("/web/programs/{name}/log")
async def follow_log(
    request: Request,
    name: str,
    offset: int = Query(0, ge=0, le=INT64_MAX),
    current: Session = Depends(session),
) -> Response:
    """Server-sent ``log`` events: what the program's log gains (redacted when written).

    Each event's id is the offset read so far, so a reconnecting browser carries on
    where it stopped; a rotated log is read from its start.
    """
    try:
        _group, state = _host(request).find(name)
    except (NotFound, Conflict):
        state = None
    resumed = request.headers.get("last-event-id", "")
    start = max(offset, int(resumed) if resumed.isdecimal() and len(resumed) < 19 else 0)

    async def events() -> AsyncIterator[str]:
        yield "retry: 1000\n\n"
        if state is None:
            yield sse_event("end", "gone")
            return
        at, generation = start, None
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + STREAM_S
        stopping = stopping_of(request.app)
        while loop.time() < ends_at and not stopping.is_set():
            if await request.is_disconnected():
                return
            piece = await asyncio.to_thread(read_log, state.log.path, at, 0)
            if generation not in (None, piece.generation):
                at, generation = 0, piece.generation  # rotated: the new file from its start
                continue
            generation = piece.generation
            if piece.next_offset != at:
                at = piece.next_offset
                if piece.text:
                    yield sse_event("log", piece.text, at)
                continue
            await unless_set(stopping, asyncio.sleep(LOG_POLL_S))

    return held_stream(
        request.app, current.token_id, events(), headers={"Cache-Control": "no-store"}
    )


@router.post("/web/programs/{name}/{action}")
async def act(
    request: Request, name: str, action: str, current: Session = Depends(session)
) -> Response:
    """Start, stop or restart a program or a group (admins, with the session's CSRF token)."""
    form = await acting_form(request, current)
    back = local_path(form.get("back"), f"/web/programs/{name}")
    if action not in _ACTIONS:
        return answer(request, back, f"{action!r} is not an action: start, stop or restart", False)
    if not current.is_admin:
        return answer(request, back, f"only admins act on programs: @{current.name} is not", False)
    host = _host(request)
    act_on = {
        "start": host.start_program,
        "stop": host.stop_program,
        "restart": host.restart_program,
    }[action]
    try:
        message = await act_on(name)
    except (NotFound, Conflict) as exc:
        return answer(request, back, str(exc), False)
    log.info(
        "Dashboard %s of program %s by @%s: %s",
        action,
        name,
        current.name,
        message,
        extra={"action": "web_program"},
    )
    return answer(request, back, message, True)
