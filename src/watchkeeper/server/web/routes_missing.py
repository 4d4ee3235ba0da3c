"""Dashboard paths that name no page: a ``404`` page in the dashboard's layout.

Its router is included after every other dashboard route and mount, so it
answers only what none of them matched; paths outside ``/web`` keep the
API's JSON errors.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from watchkeeper.server.web.routes_home import missing_page, page_session
from watchkeeper.server.web.session import Session

router = APIRouter(include_in_schema=False)


@router.get("/web")
def web_root() -> RedirectResponse:
    """The dashboard's home has a trailing slash."""
    return RedirectResponse("/web/", 307)


@router.api_route("/web/{rest:path}", methods=["GET", "HEAD"], response_class=HTMLResponse)
async def unknown_page(
    request: Request, rest: str, current: Session = Depends(page_session)
) -> HTMLResponse:
    """Any other ``/web/...`` path: says which was not found and links home."""
    return await missing_page(request, current, f"There is no page at /web/{rest}.")
