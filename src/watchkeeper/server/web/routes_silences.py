"""The dashboard's silences page, and "I am on it" on an incident's page."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import HTMLResponse, Response

from watchkeeper.errors import WatchkeeperError
from watchkeeper.server.api.fields import INT32_MAX
from watchkeeper.server.api.silences import silence_json
from watchkeeper.server.deps import services
from watchkeeper.server.web.common import acting_form, answer, local_path, page
from watchkeeper.server.web.routes_home import chrome, page_session
from watchkeeper.server.web.session import Session, session
from watchkeeper.server.web.shared import shared_overview
from watchkeeper.watch.silences import Matchers

router = APIRouter(include_in_schema=False)
SILENCES = "/web/silences"


def _silences_context(request: Request) -> dict[str, Any]:
    found = services(request)
    now = found.clock()
    return {"silences": [silence_json(s, now) for s in found.silences.list(limit=100)]}


@router.get(SILENCES, response_class=HTMLResponse)
async def silences_page(request: Request, current: Session = Depends(page_session)) -> HTMLResponse:
    """Silences, newest first, the form to add one, and a button to expire each active one."""
    context = await asyncio.to_thread(_silences_context, request)
    return page(
        request, "silences.html", current, **context, **await chrome(request), title="Silences"
    )


@router.get("/web/fragments/silences", response_class=HTMLResponse)
async def silences_fragment(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """The silences table alone, for live updates."""
    context = await asyncio.to_thread(_silences_context, request)
    return page(request, "_silences.html", current, **context)


@router.post(SILENCES)
async def add_silence(request: Request, current: Session = Depends(session)) -> Response:
    """Silence matching work for a while (admins only)."""
    form = await acting_form(request, current)
    if not current.is_admin:
        return answer(request, SILENCES, f"only admins silence work: @{current.name} is not", False)
    matchers = Matchers(
        form.get("kind") or None,
        form.get("run_id") or None,
        form.get("title") or None,
        "regex" if form.get("title_syntax") == "regex" else "glob",
        form.get("origin") or None,
    )
    try:
        made = await asyncio.to_thread(
            services(request).silences.add,
            matchers,
            form.get("duration", ""),
            form.get("comment", ""),
            f"@{current.name}",
            "dashboard",
        )
    except WatchkeeperError as exc:
        return answer(request, SILENCES, str(exc), False)
    shared_overview(request).forget()
    return answer(request, SILENCES, f"silence {made.id} added", True, silence_id=made.id)


@router.post(SILENCES + "/{silence_id}/expire")
async def expire_silence(
    request: Request,
    silence_id: int = Path(ge=1, le=INT32_MAX),
    current: Session = Depends(session),
) -> Response:
    """End a silence now (admins only)."""
    await acting_form(request, current)
    if not current.is_admin:
        return answer(
            request, SILENCES, f"only admins expire silences: @{current.name} is not", False
        )
    try:
        await asyncio.to_thread(services(request).silences.expire, silence_id, f"@{current.name}")
    except WatchkeeperError as exc:
        return answer(request, SILENCES, str(exc), False)
    return answer(request, SILENCES, f"silence {silence_id} expired", True)


@router.post("/web/incidents/{incident_id}/ack")
async def acknowledge(
    request: Request,
    incident_id: int = Path(ge=1, le=INT32_MAX),
    current: Session = Depends(session),
) -> Response:
    """ "I am on it" (admins only): marks who is looking, decides nothing."""
    form = await acting_form(request, current)
    back = local_path(form.get("back"), f"/web/incidents/{incident_id}")
    if not current.is_admin:
        return answer(request, back, f"only admins act: @{current.name} is not an admin", False)
    try:
        await asyncio.to_thread(
            services(request).silences.acknowledge, incident_id, f"@{current.name}", "dashboard"
        )
    except WatchkeeperError as exc:
        return answer(request, back, str(exc), False)
    return answer(request, back, f"noted: @{current.name} is on it", True)
