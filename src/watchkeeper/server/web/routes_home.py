"""Logging in, the home page (running work, automatic first steps), the bell and incidents."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from watchkeeper.clock import rfc3339
from watchkeeper.decide.decider import PressResult
from watchkeeper.decide.offer import label
from watchkeeper.decide.runbooks import RUNBOOKS
from watchkeeper.errors import NotFound
from watchkeeper.server.api.fields import INT32_MAX
from watchkeeper.server.api.incidents import incident_detail_json
from watchkeeper.server.deps import Services, services
from watchkeeper.server.web.common import acting_form, answer, form_of, local_path, page
from watchkeeper.server.web.session import (
    Session,
    check_login_nonce,
    close_session,
    login_nonce,
    open_session,
    read_session,
    session,
    set_login_cookie,
)
from watchkeeper.server.web.shared import shared_overview
from watchkeeper.server.web.stream import watcher_of
from watchkeeper.watch.overview import Overview, overview_json

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)
#: Most runs shown per section of the running-work card; the rest are counted.
SECTION_LIMIT = 50
#: Most open incidents listed under the bell; the count is exact.
BELL_LIMIT = 50
#: What each runbook's kind of problem is called on the page.
PROBLEMS = {
    "retry_failed_without_effects": "Failed work with no effects outside",
    "retry_out_of_attempts": "Jobs out of attempts",
    "close_abandoned_turns": "Chat turns left open with nothing running them",
}


@router.get("/")
def root() -> RedirectResponse:
    """The dashboard lives under ``/web``."""
    return RedirectResponse("/web/", 307)


@router.get("/web/login")
def login_page(request: Request, next: str | None = Query(None)) -> Response:
    """The login form: paste an API token once."""
    if read_session(request) is not None:
        return RedirectResponse(local_path(next, "/web/"), 303)
    return _login_form(request, local_path(next, "/web/"), None)


def _login_form(request: Request, target: str, error: str | None) -> Response:
    nonce, cookie = login_nonce(request)
    response = page(request, "login.html", None, next=target, error=error, nonce=nonce)
    if error is not None:
        response.status_code = 401
    set_login_cookie(request, response, cookie)
    return response


@router.post("/web/login")
async def login(request: Request) -> Response:
    """Check the API token; on success set the signed session cookie."""
    form = await form_of(request)
    check_login_nonce(request, form.get("nonce", ""))
    secret = form.get("token", "").strip()
    token = await asyncio.to_thread(services(request).tokens.login, secret)
    target = local_path(form.get("next"), "/web/")
    if token is None:
        log.info("Dashboard login refused", extra={"action": "web_login"})
        return _login_form(request, target, "unknown or revoked token")
    redirect = RedirectResponse(target, 303)
    await asyncio.to_thread(open_session, request, redirect, token)
    log.info("Dashboard login by %s", token.name, extra={"action": "web_login"})
    return redirect


@router.post("/web/logout")
async def logout(request: Request, current: Session = Depends(session)) -> Response:
    """End the session on the server, so a copy of its cookie opens nothing either."""
    await acting_form(request, current)
    redirect = RedirectResponse("/web/login", 303)
    await asyncio.to_thread(close_session, request, redirect, current)
    log.info("Dashboard logout by %s", current.name, extra={"action": "web_logout"})
    return redirect


# The running-work card ---------------------------------------------------------------


def _buttons(found: Services, overview: Overview) -> dict[int, list[dict[str, str]]]:
    buttons: dict[int, list[dict[str, str]]] = {}
    for item in overview.attention[:SECTION_LIMIT]:
        incident = overview.incidents.get((item.run.kind, item.run.run_id))
        if incident is None:
            continue
        offered = found.decider.offered(incident, item.run)
        buttons[incident.id] = [{"action": a.value, "label": label(a)} for a in offered]
    return buttons


def _tokens_by_incident(overview: Overview) -> dict[int, str]:
    return {i.id: i.state_token for i in overview.incidents.values()}


async def work_context(request: Request, show_all: bool) -> dict[str, Any]:
    """Everything the running-work card shows, read like ``GET /api/v1/runs``."""
    found = services(request)
    overview = await shared_overview(request).get(found, show_all)
    return {
        "work": overview_json(overview, SECTION_LIMIT),
        "buttons": _buttons(found, overview),
        "incident_tokens": _tokens_by_incident(overview),
        "show_all": show_all,
    }


def switches_context(found: Services) -> list[dict[str, Any]]:
    """The runbook switches, one per kind of problem."""
    return [
        {
            "name": s.runbook.name,
            "problem": PROBLEMS.get(s.runbook.name, s.runbook.description),
            "step": s.runbook.description,
            "action": label(s.runbook.action),
            "enabled": s.enabled,
            "source": s.source,
            "changed_at": rfc3339(s.changed_at),
        }
        for s in found.runbooks.switches()
    ]


def bell_context(found: Services) -> dict[str, Any]:
    """Open incidents: the exact count and the newest :data:`BELL_LIMIT`."""
    items = found.incidents.list("open", BELL_LIMIT, 0)
    return {
        "count": found.incidents.open_count(),
        "items": [
            {
                "id": i.id,
                "title": i.title,
                "condition": i.key.condition,
                "kind": i.key.kind,
                "decided": i.decision is not None,
            }
            for i in items
        ],
    }


async def page_session(request: Request, current: Session = Depends(session)) -> Session:
    """A dependency of every full page: the session, and where the page's live updates
    start, taken before the page reads anything.

    A page tells its stream the signatures it was drawn with. Taken after the page's own
    reads, a change landing in between would be in the signatures and not on the page: the
    stream would match and never fetch the list again.
    """
    request.state.stream_seed = await watcher_of(request).seed()
    return current


async def chrome(request: Request) -> dict[str, Any]:
    """What every page's frame needs: the bell (read in a thread), and where its live
    updates start (the stream's signatures and latest event id): taken by
    :func:`page_session` before the page's reads, or here for a page that read nothing
    before (a not-found page, an export's error)."""
    seed = getattr(request.state, "stream_seed", None)
    sigs, at = seed if seed is not None else await watcher_of(request).seed()
    bell = await asyncio.to_thread(bell_context, services(request))
    return {"bell": bell, "stream_sigs": sigs, "stream_at": at}


@router.get("/web/", response_class=HTMLResponse)
async def home(
    request: Request, all: bool = Query(False), current: Session = Depends(page_session)
) -> HTMLResponse:
    """Running work at the top, then the automatic first steps."""
    work = await work_context(request, all)
    switches = await asyncio.to_thread(switches_context, services(request))
    return page(
        request,
        "home.html",
        current,
        **work,
        **await chrome(request),
        switches=switches,
        title="Running work",
    )


@router.get("/web/fragments/work", response_class=HTMLResponse)
async def work_fragment(
    request: Request, all: bool = Query(False), current: Session = Depends(session)
) -> HTMLResponse:
    """The running-work card alone, for live updates."""
    return page(request, "_work.html", current, **await work_context(request, all))


@router.get("/web/fragments/switches", response_class=HTMLResponse)
async def switches_fragment(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """The automatic first steps alone, for live updates."""
    switches = await asyncio.to_thread(switches_context, services(request))
    return page(request, "_switches.html", current, switches=switches)


@router.get("/web/fragments/bell", response_class=HTMLResponse)
async def bell_fragment(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """The bell alone, for live updates (it needs no stream seed: the page listens)."""
    bell = await asyncio.to_thread(bell_context, services(request))
    return page(request, "_bell.html", current, bell=bell)


# Incidents ---------------------------------------------------------------------------


async def detail_page(
    request: Request,
    current: Session,
    name: str,
    title: str,
    read: Callable[[], dict[str, Any]],
) -> HTMLResponse:
    """A page about one thing (an incident, a job, a process run): 404 when it is not there.

    ``read`` gives the page's context and is called in a thread.
    """
    try:
        context = await asyncio.to_thread(read)
    except NotFound as exc:
        return await missing_page(request, current, str(exc))
    return page(request, name, current, **context, **await chrome(request), title=title)


async def missing_page(request: Request, current: Session, message: str) -> HTMLResponse:
    """``404`` as a page in the dashboard's layout: what was not found, and the way home."""
    response = page(
        request,
        "missing.html",
        current,
        **await chrome(request),
        message=message,
        title="Not found",
    )
    response.status_code = 404
    return response


@router.get("/web/incidents/{incident_id}", response_class=HTMLResponse)
async def incident_page(
    request: Request, incident_id: str, current: Session = Depends(page_session)
) -> HTMLResponse:
    """One incident: its history, its buttons, who pressed what (the not-found page for
    an id that names none, well-formed or not)."""
    found = services(request)

    def read() -> dict[str, Any]:
        number = int(incident_id) if incident_id.isdecimal() and len(incident_id) < 11 else 0
        if not 1 <= number <= INT32_MAX:
            raise NotFound(f"no incident {incident_id!r}")
        return {"incident": incident_detail_json(found, number)}

    return await detail_page(request, current, "incident.html", f"Incident {incident_id}", read)


def _press_extra(result: PressResult) -> dict[str, Any]:
    decision = result.decision
    return {
        "outcome": result.outcome.value,
        "won": result.won,
        "decided_by": None if decision is None else decision.actor,
        "diagnosis": result.diagnosis,
    }


@router.post("/web/incidents/{incident_id}/press")
async def press(
    request: Request,
    incident_id: int = Path(ge=1, le=INT32_MAX),
    current: Session = Depends(session),
) -> Response:
    """Press a button through the one decision function every channel uses."""
    form = await acting_form(request, current)
    back = local_path(form.get("back"), f"/web/incidents/{incident_id}")
    try:
        result = await asyncio.to_thread(
            services(request).decider.press,
            incident_id,
            form.get("action", ""),
            form.get("state_token") or None,
            current.actor(),
        )
    except NotFound as exc:
        return answer(request, back, str(exc), False)
    log.info(
        "Dashboard press on incident %d: %s by @%s: %s",
        incident_id,
        result.action.value,
        current.name,
        result.outcome.value,
        extra={"action": "web_press"},
    )
    shared_overview(request).forget()
    message = result.diagnosis or result.message
    return answer(request, back, message, result.won, **_press_extra(result))


@router.post("/web/runbooks/{name}")
async def switch_runbook(
    request: Request, name: str, current: Session = Depends(session)
) -> Response:
    """Switch an automatic first step on or off (admins only)."""
    form = await acting_form(request, current)
    if not current.is_admin:
        refused = f"only admins switch runbooks: @{current.name} is not"
        return answer(request, "/web/", refused, False)
    if name not in RUNBOOKS:
        return answer(request, "/web/", f"no runbook {name!r}", False)
    enabled = form.get("enabled") == "1"
    incidents = services(request).incidents
    await asyncio.to_thread(incidents.switch_runbook, name, enabled, f"@{current.name}")
    log.info(
        "Runbook %s switched %s", name, "on" if enabled else "off", extra={"action": "web_runbook"}
    )
    return answer(request, "/web/", f"{name} is now {'on' if enabled else 'off'}", True)
