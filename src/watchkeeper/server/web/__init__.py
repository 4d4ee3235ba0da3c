"""The dashboard: server-rendered pages with small scripts, live over server-sent events.

``install(app)`` adds its routes under ``/web``, its static files under
``/web/static``, and the two answers a page needs that the JSON API does not:
a browser without a session is sent to the login page, and a post without its
CSRF token is refused.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from watchkeeper.server.http.routers import include
from watchkeeper.server.web.common import HERE, wants_json
from watchkeeper.server.web.routes_canvas import router as canvas_router
from watchkeeper.server.web.routes_home import router as home_router
from watchkeeper.server.web.routes_incidents import router as incidents_router
from watchkeeper.server.web.routes_integrations import router as integrations_router
from watchkeeper.server.web.routes_jobs import router as jobs_router
from watchkeeper.server.web.routes_missing import router as missing_router
from watchkeeper.server.web.routes_models import router as models_router
from watchkeeper.server.web.routes_onboarding import router as onboarding_router
from watchkeeper.server.web.routes_ops import router as ops_router
from watchkeeper.server.web.routes_programs import router as programs_router
from watchkeeper.server.web.routes_settings import router as settings_router
from watchkeeper.server.web.routes_silences import router as silences_router
from watchkeeper.server.web.routes_spend import router as spend_router
from watchkeeper.server.web.session import CsrfRejected, LoginRequired
from watchkeeper.server.web.stream import router as stream_router

log = logging.getLogger(__name__)


async def _login_required(request: Request, _exc: Exception) -> Response:
    if request.method != "GET" or wants_json(request) or request.url.path == "/web/stream":
        return JSONResponse({"error": {"code": "unauthorized", "message": "log in again"}}, 401)
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/web/login?next={quote(target, safe='')}", 303)


async def _csrf_rejected(request: Request, _exc: Exception) -> Response:
    log.warning(
        "Refused a dashboard post without its CSRF token: %s",
        request.url.path,
        extra={"action": "web_csrf"},
    )
    if request.url.path == "/web/login":
        return RedirectResponse("/web/login?notice=the+form+expired%3A+try+again", 303)
    message = "this form is out of date (its CSRF token does not match): reload the page"
    if wants_json(request):
        return JSONResponse({"ok": False, "message": message}, 403)
    return HTMLResponse(f"<p>{message}</p>", 403)


def install(app: FastAPI) -> None:
    """Serve the dashboard from ``app``."""
    # Before home: its /web/incidents/{incident_id} would take /web/incidents/export.
    include(app, incidents_router)
    include(app, home_router)
    include(app, jobs_router)
    include(app, ops_router)
    include(app, silences_router)
    for pane in (models_router, integrations_router, settings_router, onboarding_router):
        include(app, pane)
    include(app, spend_router)
    include(app, canvas_router)
    include(app, programs_router)
    include(app, stream_router)
    app.mount("/web/static", StaticFiles(directory=HERE / "static"), name="web-static")
    include(app, missing_router)  # last: it answers what no dashboard route matched
    app.add_exception_handler(LoginRequired, _login_required)
    app.add_exception_handler(CsrfRejected, _csrf_rejected)
