"""``/api/v1/supervision`` and ``/web/supervision...``: the server's own supervision tree,
its circuit breakers and its health checks, and the operator's actions on them.

The API answers bearer tokens (viewers read, admins act); the dashboard's twins
answer a session (admins act, with the session's CSRF token). docs/supervision.md
describes the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from watchkeeper.errors import Conflict, NotFound
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.http.auth import admin, viewer
from watchkeeper.server.supervision import ServerSupervision
from watchkeeper.server.web.common import acting_form, answer, local_path, wants_json
from watchkeeper.server.web.session import Session, session
from watchkeeper.supervise import SuperviseError

router = APIRouter(tags=["supervision"], responses=ERRORS)


class IntensityOut(BaseModel):
    """The restart intensity: more restarts than this within the period and the tree gives up."""

    max_restarts: int
    period_s: float


class ChildOut(BaseModel):
    """One node of a supervision tree: a worker (a loop, a program) or a nested supervisor."""

    id: str = Field(description="the node's path in its tree, e.g. `server/notifier`")
    name: str
    title: str | None = Field(None, description="what the loop does, in words")
    kind: Literal["worker", "supervisor"]
    state: Literal[
        "running", "starting", "restarting", "paused", "stopped", "exited", "failed", "gave_up"
    ] = Field(description="programs also start, pause (a host check), exit and fail")
    restarts: int = Field(description="restarts since the server started, failures and requests")
    last_exit: str | None = Field(description="how it last ended (`reason: detail`), if it did")
    strategy: Literal["one_for_one", "one_for_all", "rest_for_one"] | None = Field(
        None, description="a nested supervisor's (a program group's) strategy"
    )
    intensity: IntensityOut | None = Field(None, description="a nested supervisor's intensity")
    pid: int | None = Field(None, description="a program's process id, while it runs")
    detail: str | None = Field(
        None, description="what it waits for: `restarting in 2 s`, `paused: ...`"
    )
    href: str | None = Field(None, description="its page on the dashboard, if it has one")
    children: list[ChildOut] = Field(description="a nested supervisor's children; [] for workers")


class TreeOut(BaseModel):
    """A supervision tree's root supervisor."""

    id: str
    name: str
    kind: Literal["supervisor"]
    strategy: Literal["one_for_one", "one_for_all", "rest_for_one"]
    state: Literal["running", "stopped", "gave_up"]
    restarts: int
    intensity: IntensityOut | None = Field(
        description="null for the programs' tree: each group has its own"
    )
    children: list[ChildOut]


class BreakerOut(BaseModel):
    """A circuit breaker the server calls a dependency through."""

    name: str = Field(description="e.g. `notify:telegram`")
    state: Literal["closed", "open", "half-open"]
    failures: int
    successes: int
    rejections: int = Field(description="calls refused while it was open")
    node: str | None = Field(description="the tree node that calls through it")


class CheckOut(BaseModel):
    """A health check and its latest effective status."""

    name: str
    status: Literal["healthy", "degraded", "unhealthy"]
    detail: str
    node: str | None = Field(description="the tree node the check is about, if one")


class SupervisionOut(BaseModel):
    """``GET /api/v1/supervision``: the server's trees, breakers and health checks."""

    trees: list[TreeOut]
    breakers: list[BreakerOut]
    health: list[CheckOut]


class ActionOut(BaseModel):
    """What an action did."""

    ok: bool
    message: str


def supervision_of(request: Request) -> ServerSupervision:
    """The supervision of the app serving ``request``."""
    found: ServerSupervision = request.app.state.supervision
    return found


# The API ---------------------------------------------------------------------------------


@router.get("/api/v1/supervision", response_model=SupervisionOut, dependencies=[Depends(viewer)])
def supervision(request: Request) -> dict[str, Any]:
    """The server's supervision tree, its circuit breakers and its health checks, now."""
    return supervision_of(request).snapshot()


def _acted(message: str) -> dict[str, Any]:
    return {"ok": True, "message": message}


@router.post(
    "/api/v1/supervision/children/{child_id:path}/restart",
    response_model=ActionOut,
    dependencies=[Depends(admin)],
)
async def restart_child(request: Request, child_id: str) -> dict[str, Any]:
    """Restart one child of the tree (e.g. `server/notifier`), or a program or group by its
    node id (`programs/crawl/crawler`, `programs/crawl`), now."""
    return _acted(await supervision_of(request).restart_child(child_id))


@router.post(
    "/api/v1/supervision/children/{child_id:path}/stop",
    response_model=ActionOut,
    dependencies=[Depends(admin)],
)
async def stop_child(request: Request, child_id: str) -> dict[str, Any]:
    """Stop one child of the tree, or a program or group by its node id, until it is
    restarted."""
    return _acted(await supervision_of(request).stop_child(child_id))


@router.post(
    "/api/v1/supervision/breakers/{name}/open",
    response_model=ActionOut,
    dependencies=[Depends(admin)],
)
async def open_breaker(request: Request, name: str) -> dict[str, Any]:
    """Force a circuit breaker open: its dependency is not called until a probe is let through."""
    return _acted(await supervision_of(request).open_breaker(name))


# The dashboard's twins -------------------------------------------------------------------


@router.get("/web/supervision.json", include_in_schema=False)
def supervision_json(request: Request, _current: Session = Depends(session)) -> JSONResponse:
    """What ``GET /api/v1/supervision`` answers, for a dashboard session."""
    return JSONResponse(supervision_of(request).snapshot())


async def _web_act(
    request: Request, current: Session, act: Callable[[ServerSupervision], Awaitable[str]]
) -> Response:
    """An action from the dashboard: admins only, with the session's CSRF token."""
    form = await acting_form(request, current)
    back = local_path(form.get("back"), "/web/topology")
    if not current.is_admin:
        return _refused(
            request, back, f"only admins act on supervision: @{current.name} is not", 403
        )
    try:
        message = await act(supervision_of(request))
    except NotFound as exc:
        return _refused(request, back, str(exc), 404)
    except (Conflict, SuperviseError) as exc:
        return _refused(request, back, str(exc), 409)
    return answer(request, back, message, True)


def _refused(request: Request, back: str, message: str, status: int) -> Response:
    if wants_json(request):
        return JSONResponse({"ok": False, "message": message}, status_code=status)
    return answer(request, back, message, False)


@router.post("/web/supervision/children/{child_id:path}/restart", include_in_schema=False)
async def web_restart_child(
    request: Request, child_id: str, current: Session = Depends(session)
) -> Response:
    """Restart one child, from the dashboard."""
    return await _web_act(request, current, lambda sup: sup.restart_child(child_id))


@router.post("/web/supervision/children/{child_id:path}/stop", include_in_schema=False)
async def web_stop_child(
    request: Request, child_id: str, current: Session = Depends(session)
) -> Response:
    """Stop one child, from the dashboard."""
    return await _web_act(request, current, lambda sup: sup.stop_child(child_id))


@router.post("/web/supervision/breakers/{name}/open", include_in_schema=False)
async def web_open_breaker(
    request: Request, name: str, current: Session = Depends(session)
) -> Response:
    """Force a breaker open, from the dashboard."""
    return await _web_act(request, current, lambda sup: sup.open_breaker(name))
