"""Spend: priced model calls by day, model, provider and role."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from watchkeeper.errors import InvalidInput
from watchkeeper.server.deps import services
from watchkeeper.server.web import charts
from watchkeeper.server.web.common import page
from watchkeeper.server.web.routes_home import chrome
from watchkeeper.server.web.session import Session, session

router = APIRouter(include_in_schema=False)
SPEND_GROUPINGS = ("day", "model", "provider", "role")


def _spend_context(request: Request) -> dict[str, Any]:
    timeline = services(request).timeline
    charts_by: dict[str, Any] = {}
    for by in SPEND_GROUPINGS:
        report = timeline.spend(by).as_dict()
        groups = report["groups"]
        # Days read in order, the latest month; the others costliest first.
        groups = sorted(groups, key=lambda g: str(g["key"]))[-31:] if by == "day" else groups[:15]
        charts_by[by] = {"report": report, "picture": charts.bars(groups, f"bar bar-{by}")}
    return {"charts": charts_by}


@router.get("/web/spend", response_class=HTMLResponse)
async def spend_page(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """Spend by day, model, provider and role."""
    try:
        context = await asyncio.to_thread(_spend_context, request)
    except (ImportError, InvalidInput) as exc:
        context = {"charts": None, "error": str(exc)}
    return page(request, "spend.html", current, **context, **await chrome(request), title="Spend")
