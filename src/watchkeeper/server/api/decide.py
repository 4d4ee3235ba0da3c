"""Pressing buttons over the API: decide, diagnose, and the runbook switches."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from watchkeeper.access.tokens import Role, TokenInfo
from watchkeeper.clock import rfc3339
from watchkeeper.decide.actors import Actor
from watchkeeper.decide.decider import Outcome, PressResult
from watchkeeper.decide.runbooks import RUNBOOKS
from watchkeeper.errors import NotFound
from watchkeeper.server.api.fields import INT32_MAX, Line
from watchkeeper.server.api.incidents import decision_json
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import services
from watchkeeper.server.http.auth import admin, viewer
from watchkeeper.server.http.errors import error_response

router = APIRouter(tags=["decisions"], responses=ERRORS)

#: The header the command line sends so its presses read "on the command line"; it can
#: name only the command line, never another channel.
CLIENT_HEADER = "x-watchkeeper-client"
#: What older clients put in the body's ``via``: ignored, since the channel is the API.
_LEGACY_VIAS = frozenset({"api", "cli"})

_LOSING_STATUS = {
    Outcome.ALREADY_DECIDED: 409,
    Outcome.STALE: 409,
    Outcome.REFUSED: 403,
    Outcome.NOT_OFFERED: 422,
}


class DecideBody(BaseModel):
    """``POST /api/v1/incidents/{id}/decide``."""

    model_config = ConfigDict(extra="forbid")

    action: Literal[
        "cancel", "retry", "retry_checked", "close_turn", "dismiss", "diagnose", "restart", "stop"
    ]
    state_token: Annotated[str, Line(100)] | None = None
    # Not part of the schema: the channel names itself. Older clients sent "api" or "cli"
    # here, so those are still accepted (and ignored); anything else is refused by the route.
    via: SkipJsonSchema[str | None] = Field(default=None, max_length=32)


class RunbookBody(BaseModel):
    """``PUT /api/v1/runbooks/{name}``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool


def api_via(request: Request) -> str:
    """The channel of an API request: ``cli`` when the command line says so, else ``api``."""
    return "cli" if request.headers.get(CLIENT_HEADER, "").strip().lower() == "cli" else "api"


def actor_of(token: TokenInfo, via: str) -> Actor:
    """An API caller as a presser: admins act, everyone may ask for a diagnosis."""
    return Actor(f"@{token.name}", via, token.role is Role.ADMIN)


def press_json(result: PressResult) -> dict[str, Any]:
    """The answer to a press."""
    record = result.action_record
    return {
        "outcome": result.outcome.value,
        "message": result.message,
        "incident_id": result.incident_id,
        "action": result.action.value,
        "decision": decision_json(result.decision),
        "journal": None
        if record is None
        else {"id": record.id, "status": record.status.value, "answer": record.answer},
        "diagnosis": result.diagnosis,
    }


def _answer(result: PressResult) -> JSONResponse:
    status = _LOSING_STATUS.get(result.outcome)
    if status is None:
        return JSONResponse(press_json(result))
    error = {"code": result.outcome.value, "message": result.message, "press": press_json(result)}
    return JSONResponse({"error": error}, status_code=status)


@router.post("/api/v1/incidents/{incident_id}/decide")
async def decide(
    body: DecideBody,
    request: Request,
    incident_id: int = Path(ge=1, le=INT32_MAX),
    token: TokenInfo = Depends(viewer),
) -> JSONResponse:
    """Press a button. The first decision wins everywhere; later presses are told who won.

    The press is recorded as made on the API (or the command line): the dashboard and
    the chat platforms press through their own routes. Presses of one card in flight
    together are judged together, off the event loop, in as few reads and writes as
    their order allows.
    """
    if body.via is not None and body.via not in _LEGACY_VIAS:
        message = (
            f"via {body.via!r} cannot be chosen: a press over the API is recorded as made on "
            "the API; remove the via field (press on the dashboard to press as the dashboard)"
        )
        return error_response(400, "via_not_allowed", message, "via")
    result = await services(request).decider.press_async(
        incident_id, body.action, body.state_token, actor_of(token, api_via(request))
    )
    return _answer(result)


@router.post("/api/v1/incidents/{incident_id}/diagnose")
def diagnose(
    request: Request,
    incident_id: int = Path(ge=1, le=INT32_MAX),
    token: TokenInfo = Depends(viewer),
) -> JSONResponse:
    """Ask to diagnose: read-only, decides nothing."""
    actor = actor_of(token, api_via(request))
    return _answer(services(request).decider.press(incident_id, "diagnose", None, actor))


def _switch_json(switch: Any) -> dict[str, Any]:
    return {
        "name": switch.runbook.name,
        "description": switch.runbook.description,
        "action": switch.runbook.action.value,
        "enabled": switch.enabled,
        "source": switch.source,
        "changed_at": rfc3339(switch.changed_at),
    }


@router.get("/api/v1/runbooks", dependencies=[Depends(viewer)])
def list_runbooks(request: Request) -> dict[str, Any]:
    """Every automatic first step and whether it is switched on."""
    return {"runbooks": [_switch_json(s) for s in services(request).runbooks.switches()]}


@router.put("/api/v1/runbooks/{name}")
def switch_runbook(
    name: str, body: RunbookBody, request: Request, token: TokenInfo = Depends(admin)
) -> dict[str, Any]:
    """Switch an automatic first step on or off (admins only)."""
    if name not in RUNBOOKS:
        raise NotFound(f"no runbook {name!r}; known: {', '.join(RUNBOOKS)}")
    found = services(request)
    found.incidents.switch_runbook(name, body.enabled, f"@{token.name}")
    switch = next(s for s in found.runbooks.switches() if s.runbook.name == name)
    return _switch_json(switch)
