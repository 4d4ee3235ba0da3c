"""The supervision canvas: the server's supervision tree drawn as nodes and edges.

The page is a frame; ``static/canvas.js`` reads ``/web/supervision.json`` and draws
the trees, their children, the circuit breakers and health checks beside the node
each guards, and acts on them through the supervision posts.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from watchkeeper.server.web.common import page
from watchkeeper.server.web.routes_home import chrome
from watchkeeper.server.web.session import Session, session

router = APIRouter(include_in_schema=False)


@router.get("/web/supervision", response_class=HTMLResponse)
async def supervision_page(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """The supervision tree as a picture to tap, pinch and pan."""
    return page(request, "supervision.html", current, **await chrome(request),
                title="Supervision")  # fmt: skip
