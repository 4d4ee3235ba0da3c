"""``/api/v1/incidents``: one per piece of work, condition and failure fingerprint."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from watchkeeper.clock import rfc3339
from watchkeeper.decide.offer import label
from watchkeeper.errors import InvalidInput
from watchkeeper.server.api.fields import INT32_MAX, Line
from watchkeeper.server.api.incidents_csv import EXPORT_MAX, incidents_csv
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.api.silences import care_fields
from watchkeeper.server.deps import Services, services
from watchkeeper.server.http.auth import viewer
from watchkeeper.watch.incidents import NOBODY, Decision, Incident, IncidentQuery

router = APIRouter(prefix="/api/v1/incidents", tags=["incidents"], responses=ERRORS)


def decision_json(decision: Decision | None) -> dict[str, Any] | None:
    """A decision as the API shows it, on an incident and in the answer to a press."""
    if decision is None:
        return None
    return {
        "action": decision.action,
        "label": label(decision.action),
        "by": decision.actor,
        "via": decision.via,
        "at": rfc3339(decision.at),
    }


def incident_json(incident: Incident, with_events: bool = False) -> dict[str, Any]:
    """An incident as the API shows it."""
    body: dict[str, Any] = {
        "id": incident.id,
        "kind": incident.key.kind,
        "run_id": incident.key.run_id,
        "condition": incident.key.condition,
        "fingerprint": incident.key.fingerprint or None,
        "status": incident.status.value,
        "title": incident.title,
        "reason": incident.reason,
        "since": rfc3339(incident.since),
        "opened_at": rfc3339(incident.opened_at),
        "updated_at": rfc3339(incident.updated_at),
        "resolved_at": rfc3339(incident.resolved_at),
        "resolution": incident.resolution,
        "state_token": incident.state_token,
        "origin": incident.origin,
        "effects": incident.effects,
        "episodes": incident.episodes,
        "dismissed": incident.suppressed,
        "decision": decision_json(incident.decision),
    }
    if with_events:
        body["events"] = [
            {"at": rfc3339(e.at), "type": e.type, "detail": e.detail} for e in incident.events
        ]
    return body


def incident_detail_json(found: Services, incident_id: int) -> dict[str, Any]:
    """One incident with its history, the buttons it offers now, its presses and its journal.

    The API and the dashboard's incident page show the same detail.
    """
    detail = found.incidents.detail(incident_id)
    body = incident_json(detail.incident, with_events=True)
    body.update(care_fields(found, [detail.incident])[detail.incident.id])
    body["buttons"] = [
        {"action": action.value, "label": label(action)}
        for action in found.decider.offered(detail.incident)
    ]
    body["presses"] = [
        {
            "at": rfc3339(p.at),
            "actor": p.actor,
            "via": p.via,
            "action": p.action,
            "outcome": p.outcome,
            "detail": p.detail,
        }
        for p in detail.presses
    ]
    body["journal"] = [
        {
            "id": a.id,
            "action": a.action,
            "actor": a.actor,
            "via": a.via,
            "status": a.status.value,
            "started_at": rfc3339(a.started_at),
            "finished_at": rfc3339(a.finished_at),
            "answer": a.answer,
        }
        for a in detail.journal
    ]
    return body


class _Filters:
    """The filters of the list and its exports, read from the query string."""

    def __init__(
        self,
        status: Literal["live", "open", "recovered", "resolved"] | None = Query(
            None, description="live means open or recovered"
        ),
        kind: Annotated[str, Line(63)] | None = Query(None, description="the kind of work"),
        condition: Literal["stalled", "stuck", "looping", "failed", "slow"] | None = Query(None),
        decided_by: Annotated[str, Line(200)] | None = Query(
            None, description=f"who decided (`@name`), or `{NOBODY}` for the undecided"
        ),
        since: Annotated[str, Line(40)] | None = Query(
            None, description="opened at or after this time (RFC 3339)"
        ),
        until: Annotated[str, Line(40)] | None = Query(
            None, description="opened before this time (RFC 3339)"
        ),
        q: Annotated[str, Line(200)] | None = Query(
            None, description="text found in the title, the run id or the reason, in any case"
        ),
    ) -> None:
        after, before = time_filter("since", since), time_filter("until", until)
        if after is not None and before is not None and before <= after:
            raise InvalidInput("until must be later than since", "until")
        self.query = IncidentQuery(status, kind, condition, decided_by, after, before, q or None)


def time_filter(name: str, value: str | None) -> datetime | None:
    """``since`` or ``until`` as a time (naive: UTC); :class:`InvalidInput` says how to write
    it."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"{name} {value!r} is not a time: write it as RFC 3339, e.g. 2026-01-05T12:00:00Z",
            name,
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@router.get("", dependencies=[Depends(viewer)])
def list_incidents(
    request: Request,
    filters: _Filters = Depends(),
    limit: int = Query(200, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000),
) -> dict[str, Any]:
    """Incidents, newest first, one page; ``total`` counts every page."""
    found = services(request)
    items, total = found.incidents.search(filters.query, limit, offset)
    care = care_fields(found, items)
    return {
        "incidents": [{**incident_json(i), **care[i.id]} for i in items],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


@router.get("/export", dependencies=[Depends(viewer)], response_model=None)
def export_incidents(
    request: Request,
    filters: _Filters = Depends(),
    format: Literal["csv", "json"] = Query("json", description="csv or json"),
) -> Response:
    """Every incident the filters find (at most 10,000, newest first), as a CSV or JSON file."""
    items, total = services(request).incidents.search(filters.query, EXPORT_MAX, 0)
    return export_file(items, total, format)


def export_file(items: list[Incident], total: int, format: str) -> Response:
    """``items`` (of ``total`` found) as the file to download: CSV, or else JSON."""
    headers = {
        "Content-Disposition": f'attachment; filename="incidents.{format}"',
        "X-Total-Count": str(total),
    }
    if format == "csv":
        return Response(incidents_csv(items), media_type="text/csv; charset=utf-8", headers=headers)
    body = {
        "incidents": [incident_json(i) for i in items],
        "total": total,
        "truncated": total > len(items),
    }
    return JSONResponse(body, headers=headers)


@router.get("/{incident_id}", dependencies=[Depends(viewer)])
def get_incident(request: Request, incident_id: int = Path(ge=1, le=INT32_MAX)) -> dict[str, Any]:
    """One incident with its history, its buttons, its decision, presses and action journal."""
    return incident_detail_json(services(request), incident_id)
