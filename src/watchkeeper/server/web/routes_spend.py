"""Spend: priced model calls by day, model, provider and role, over a date range.

The range is the query string (``since``, ``until``: dates, or times as the API takes
them), so a reload or a shared link shows the same view. A range that does not parse is
a message on the page, never a traceback or a JSON error.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from watchkeeper.clock import rfc3339
from watchkeeper.errors import InvalidInput
from watchkeeper.server.api.timeline import range_end
from watchkeeper.server.deps import services
from watchkeeper.server.web import charts
from watchkeeper.server.web.common import page
from watchkeeper.server.web.routes_home import chrome, page_session
from watchkeeper.server.web.session import Session

router = APIRouter(include_in_schema=False)
SPEND_GROUPINGS = ("day", "model", "provider", "role")
ENDS = ("since", "until")
#: Longer values are not a date anyone typed.
MAX_VALUE = 40


class _Range:
    """The range as the query string holds it, and what is wrong with it."""

    def __init__(self, request: Request) -> None:
        params = request.query_params
        self.values = {name: params.get(name, "").strip()[:MAX_VALUE] for name in ENDS}
        self.problems: list[str] = []
        ends: dict[str, datetime | None] = {}
        for name in ENDS:
            try:
                ends[name] = range_end(name, self.values[name] or None)
            except InvalidInput as exc:
                self.problems.append(str(exc))
                self.values[name] = ""  # the form asks for it afresh
        self.since, self.until = ends.get("since"), ends.get("until")
        if self.since is not None and self.until is not None and self.until <= self.since:
            self.problems.append("until must be later than since")

    def field(self, name: str) -> str:
        """What the form's date field shows: the date of a time given in the URL."""
        return self.values[name][:10]

    def shown(self) -> dict[str, str | None]:
        """The range's ends as times (``until`` as the last moment it counts)."""
        last = None if self.until is None else self.until - timedelta(seconds=1)
        return {"since": rfc3339(self.since), "until": rfc3339(last)}


def _spend_context(request: Request, span: _Range) -> dict[str, Any]:
    timeline = services(request).timeline
    charts_by: dict[str, Any] = {}
    first = last = None
    for by in SPEND_GROUPINGS:
        found = timeline.spend(by, since=span.since, until=span.until)
        report = found.as_dict()
        groups = report["groups"]
        # Days read in order, the latest month; the others costliest first.
        groups = sorted(groups, key=lambda g: str(g["key"]))[-31:] if by == "day" else groups[:15]
        charts_by[by] = {"report": report, "picture": charts.bars(groups, f"bar bar-{by}")}
        if by == "day":
            firsts = [g.first_at for g in found.groups if g.first_at is not None]
            lasts = [g.last_at for g in found.groups if g.last_at is not None]
            first, last = min(firsts, default=None), max(lasts, default=None)
    return {"charts": charts_by, "first_at": rfc3339(first), "last_at": rfc3339(last)}


@router.get("/web/spend", response_class=HTMLResponse)
async def spend_page(request: Request, current: Session = Depends(page_session)) -> HTMLResponse:
    """Spend by day, model, provider and role, over the range the URL asks for."""
    span = _Range(request)
    context: dict[str, Any] = {"charts": None}
    if not span.problems:
        try:
            context = await asyncio.to_thread(_spend_context, request, span)
        except (ImportError, InvalidInput) as exc:
            context = {"charts": None, "error": str(exc)}
    answer = page(
        request,
        "spend.html",
        current,
        **context,
        **await chrome(request),
        title="Spend",
        span=span,
        problems=span.problems,
        ranged=bool(span.since or span.until),
    )
    if span.problems:
        answer.status_code = 400
    return answer
