"""The supervision canvas: the server's supervision tree drawn as nodes and edges.

The page is a frame; ``static/canvas*.js`` read ``/web/canvas.json`` and draw the
trees, their children, the circuit breakers and health checks beside the node each
guards, the process runs as cards and the health endpoint, and act on them through
the supervision posts and the canvas's own (:mod:`.canvas_actions`).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from watchkeeper.server.http.routers import include
from watchkeeper.server.web.canvas_actions import router as actions_router
from watchkeeper.server.web.common import page
from watchkeeper.server.web.routes_home import chrome, page_session
from watchkeeper.server.web.session import Session

router = APIRouter(include_in_schema=False)
# The canvas's actions travel with its page: whoever serves one serves the other.
include(router, actions_router)


@router.get("/web/supervision", response_class=HTMLResponse)
async def supervision_page(
    request: Request, current: Session = Depends(page_session)
) -> HTMLResponse:
    """The supervision tree as a picture to tap, pinch and pan."""
    return page(request, "supervision.html", current, **await chrome(request), title="Supervision")
