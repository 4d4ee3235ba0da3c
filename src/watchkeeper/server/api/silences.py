"""``/api/v1/silences`` and ``/api/v1/incidents/{id}/ack``: mute matching work, say who is looking.

A silence's ``title`` is a shell-style pattern over the whole title by default
(``title_syntax`` ``glob``: ``nightly *``) or a regular expression searched in
it (``regex``). Silences are created, listed and expired by admins over the API,
the command line, the dashboard and a card's "Silence 1 h" button.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from watchkeeper.access.tokens import TokenInfo
from watchkeeper.clock import rfc3339
from watchkeeper.server.api.fields import INT32_MAX, Line, Text
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import Services, services
from watchkeeper.server.http.auth import admin, viewer
from watchkeeper.watch.incidents import Incident
from watchkeeper.watch.silences import Ack, Matchers, Silence

router = APIRouter(tags=["silences"], responses=ERRORS)


def api_via(request: Request) -> str:
    """``cli`` when the command line says so (as it does for presses), else ``api``."""
    return (
        "cli" if request.headers.get("x-watchkeeper-client", "").strip().lower() == "cli" else "api"
    )


class SilenceBody(BaseModel):
    """``POST /api/v1/silences``: at least one matcher, and how long."""

    model_config = ConfigDict(extra="forbid")

    kind: Annotated[str, Line(63)] | None = None
    run_id: Annotated[str, Line(200)] | None = None
    title: Annotated[str, Line(500)] | None = Field(
        None, description="a glob over the whole title (default) or a regex searched in it"
    )
    title_syntax: Literal["glob", "regex"] = "glob"
    origin: Annotated[str, Line(300)] | None = Field(
        None, description="the chat work came from: PLATFORM:CHAT or PLATFORM:CHAT/THREAD"
    )
    duration: Annotated[str, Line(32)] | float = Field(
        description='seconds, or "30m", "1h", "2h30m", "1d" (at most 30 days)'
    )
    comment: Annotated[str, Text(2000)] = ""


def silence_json(
    silence: Silence, now: datetime, covered: list[int] | None = None
) -> dict[str, Any]:
    """A silence as the API shows it."""
    ended = silence.ends_at <= now
    body: dict[str, Any] = {
        "id": silence.id,
        "matchers": {
            "kind": silence.kind,
            "run_id": silence.run_id,
            "title": silence.title_pattern,
            "title_syntax": silence.title_syntax,
            "origin": silence.origin,
        },
        "comment": silence.comment,
        "created_by": silence.created_by,
        "created_via": silence.created_via,
        "created_at": rfc3339(silence.created_at),
        "starts_at": rfc3339(silence.starts_at),
        "ends_at": rfc3339(silence.ends_at),
        "state": "expired" if ended else "active",
        "expired_by": silence.expired_by,
        "announced_at": rfc3339(silence.announced_at),
    }
    if covered is not None:
        body["incidents"] = covered
    return body


def ack_json(ack: Ack | None) -> dict[str, Any] | None:
    """Who is looking, as the API shows it."""
    if ack is None:
        return None
    return {"by": ack.actor, "via": ack.via, "at": rfc3339(ack.at)}


def care_fields(found: Services, incidents: list[Incident]) -> dict[int, dict[str, Any]]:
    """For each incident: the silence in force over it and who is looking, as API fields."""
    silencing = found.silences.silencing(incidents)
    acks = found.silences.acknowledgements(incidents)
    fields: dict[int, dict[str, Any]] = {}
    for incident in incidents:
        silence = silencing.get(incident.id)
        fields[incident.id] = {
            "silenced": None
            if silence is None
            else {"silence_id": silence.id, "until": rfc3339(silence.ends_at)},
            "acknowledged": ack_json(acks.get(incident.id)),
        }
    return fields


@router.post("/api/v1/silences", status_code=201)
def create_silence(
    body: SilenceBody, request: Request, token: TokenInfo = Depends(admin)
) -> dict[str, Any]:
    """Silence matching work from now for ``duration`` (admins only).

    Its incidents are still opened, recorded and listed (marked silenced); no
    card or note is sent about them until it ends; its end is announced once.
    """
    found = services(request)
    matchers = Matchers(body.kind, body.run_id, body.title, body.title_syntax, body.origin)
    silence = found.silences.add(
        matchers, body.duration, body.comment, f"@{token.name}", api_via(request)
    )
    return silence_json(silence, found.clock(), [])


@router.get("/api/v1/silences", dependencies=[Depends(viewer)])
def list_silences(
    request: Request,
    state: Literal["active", "all"] = Query("active", description="active, or all (ended too)"),
    limit: int = Query(200, ge=1, le=1000),
) -> dict[str, Any]:
    """Silences, newest first."""
    found = services(request)
    now = found.clock()
    items = found.silences.list(active=state == "active", limit=limit)
    return {"silences": [silence_json(s, now) for s in items]}


@router.get("/api/v1/silences/{silence_id}", dependencies=[Depends(viewer)])
def get_silence(request: Request, silence_id: int = Path(ge=1, le=INT32_MAX)) -> dict[str, Any]:
    """One silence, with the incidents whose messages it held back."""
    found = services(request)
    silence = found.silences.get(silence_id)
    return silence_json(silence, found.clock(), found.silences.covered(silence_id))


@router.delete("/api/v1/silences/{silence_id}")
def expire_silence(
    request: Request,
    silence_id: int = Path(ge=1, le=INT32_MAX),
    token: TokenInfo = Depends(admin),
) -> dict[str, Any]:
    """Expire a silence now (admins only); its end is announced once, like a natural one."""
    found = services(request)
    silence = found.silences.expire(silence_id, f"@{token.name}")
    return silence_json(silence, found.clock(), found.silences.covered(silence_id))


@router.post("/api/v1/incidents/{incident_id}/ack")
def acknowledge(
    request: Request,
    incident_id: int = Path(ge=1, le=INT32_MAX),
    token: TokenInfo = Depends(admin),
) -> JSONResponse:
    """ "I am on it": mark who is looking, without deciding (admins only).

    Shown on the incident's cards (they are edited), the dashboard and the API
    until the incident is resolved; a new episode needs a new acknowledgement.
    """
    found = services(request)
    ack = found.silences.acknowledge(incident_id, f"@{token.name}", api_via(request))
    return JSONResponse({"incident_id": incident_id, "acknowledged": ack_json(ack)})
