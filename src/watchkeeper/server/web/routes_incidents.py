"""The dashboard's incidents list: search and filters in a GET form, pages, and exports.

The filters are the query string, so a reload or a shared link shows the same view. A
filter that does not parse is a message on the page, never a traceback or a JSON error.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from watchkeeper.errors import InvalidInput
from watchkeeper.server.api.incidents import export_file, incident_json, time_filter
from watchkeeper.server.api.incidents_csv import EXPORT_MAX
from watchkeeper.server.deps import services
from watchkeeper.server.web.common import page
from watchkeeper.server.web.routes_home import chrome, page_session
from watchkeeper.server.web.session import Session, session
from watchkeeper.watch.incidents import NOBODY, STATUSES, IncidentQuery

router = APIRouter(include_in_schema=False)
INCIDENTS = "/web/incidents"
FIELDS = ("q", "kind", "condition", "status", "decided_by", "since", "until")
CONDITIONS = ("stalled", "stuck", "looping", "failed", "slow")
#: Rows on one page unless the link says otherwise.
PAGE = 50
MAX_PAGE = 500
#: Longer values are not a filter anyone typed.
MAX_VALUE = 200


class _Filters:
    """The view as the query string holds it, and what is wrong with it."""

    def __init__(self, request: Request) -> None:
        params = request.query_params
        self.values = {name: params.get(name, "").strip()[:MAX_VALUE] for name in FIELDS}
        self.problems: list[str] = []
        self.limit = self._number(params.get("limit"), "limit", PAGE, 1, MAX_PAGE)
        self.offset = self._number(params.get("offset"), "offset", 0, 0, 1_000_000)
        v = self.values
        self._choice("status", STATUSES)
        self._choice("condition", CONDITIONS)
        since, until = self._time("since"), self._time("until")
        if since is not None and until is not None and until <= since:
            self.problems.append("until must be later than since")
        self.query = IncidentQuery(
            v["status"] or None,
            v["kind"] or None,
            v["condition"] or None,
            v["decided_by"] or None,
            since,
            until,
            v["q"] or None,
        )

    def _number(self, raw: str | None, name: str, default: int, least: int, most: int) -> int:
        if not raw:
            return default
        if not raw.isdecimal() or not least <= int(raw) <= most:
            self.problems.append(f"{name} {raw!r} is not a whole number from {least} to {most}")
            return default
        return int(raw)

    def _choice(self, name: str, allowed: tuple[str, ...]) -> None:
        value = self.values[name]
        if value and value not in allowed:
            self.problems.append(f"{name} {value!r} is not one of {', '.join(allowed)}")

    def _time(self, name: str) -> datetime | None:
        value = self.values[name]
        if not value:
            return None
        try:
            return time_filter(name, value)
        except InvalidInput as exc:
            self.problems.append(str(exc))
            return None

    def link(self, **extra: Any) -> str:
        """The query string of this view with ``extra`` changed; empty filters left out."""
        kept = {name: value for name, value in self.values.items() if value}
        kept.update({name: value for name, value in extra.items() if value is not None})
        return urlencode(kept)


def _page_context(request: Request, filters: _Filters) -> dict[str, Any]:
    if filters.problems:
        return {"incidents": [], "total": 0}
    items, total = services(request).incidents.search(filters.query, filters.limit, filters.offset)
    return {"incidents": [incident_json(i) for i in items], "total": total}


def _count(offset: int, shown: int, total: int) -> str:
    """``5 of 5`` when one page holds them all, else ``3 to 4 of 5``."""
    if offset == 0 and shown == total:
        return f"{total} of {total}"
    return f"{offset + 1} to {offset + shown} of {total}" if shown else f"0 of {total}"


async def _draw(
    request: Request, current: Session, filters: _Filters, context: dict[str, Any]
) -> HTMLResponse:
    shown, limit, offset = len(context["incidents"]), filters.limit, filters.offset
    more = offset + shown < context["total"]
    links = {
        "previous": filters.link(limit=limit, offset=max(0, offset - limit)) if offset else None,
        "next": filters.link(limit=limit, offset=offset + limit) if more else None,
        "csv": filters.link(format="csv"),
        "json": filters.link(format="json"),
    }
    answer = page(
        request,
        "incidents.html",
        current,
        **context,
        **await chrome(request),
        title="Incidents",
        filters=filters.values,
        problems=filters.problems,
        links=links,
        count=_count(offset, shown, context["total"]),
        conditions=CONDITIONS,
        statuses=STATUSES,
        nobody=NOBODY,
    )
    if filters.problems:
        answer.status_code = 400
    return answer


@router.get(INCIDENTS, response_class=HTMLResponse)
async def incidents_page(
    request: Request, current: Session = Depends(page_session)
) -> HTMLResponse:
    """Every incident, newest first, one page at a time, as the filters in the URL ask."""
    filters = _Filters(request)
    context = await asyncio.to_thread(_page_context, request, filters)
    return await _draw(request, current, filters, context)


@router.get(INCIDENTS + "/export", response_model=None)
async def export_incidents(request: Request, current: Session = Depends(session)) -> Response:
    """What the view's filters find (at most 10,000, newest first) as a CSV or JSON file,
    the same file as the API's export, for the dashboard's session."""
    filters = _Filters(request)
    format = request.query_params.get("format", "json")
    if format not in ("csv", "json"):
        filters.problems.append(f"format {format!r} is not csv or json")
    if filters.problems:
        return await _draw(request, current, filters, {"incidents": [], "total": 0})
    items, total = await asyncio.to_thread(
        services(request).incidents.search, filters.query, EXPORT_MAX, 0
    )
    return export_file(items, total, format)
