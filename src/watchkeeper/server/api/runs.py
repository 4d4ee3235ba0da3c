"""``/api/v1/runs``: report work and list what needs attention."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from watchkeeper.clock import rfc3339
from watchkeeper.errors import NotFound
from watchkeeper.server.api.schemas import (
    ErrorOut,
    Fail,
    Finish,
    KindName,
    OriginIn,
    Progress,
    RunId,
    RunOut,
    StartRun,
    Waiting,
)
from watchkeeper.server.deps import services
from watchkeeper.server.http.auth import reporter, viewer
from watchkeeper.watch.overview import Overview, judged_json, overview_json
from watchkeeper.watch.reports import NewRun, PushRun, Reports

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 409, 413, 422, 503)
}
router = APIRouter(prefix="/api/v1/runs", tags=["runs"], responses=ERRORS)


def _reports(request: Request) -> Reports:
    return services(request).reports


def run_json(run: PushRun) -> dict[str, Any]:
    """A stored push run as the API shows it (the shape of :class:`RunOut`)."""
    failure = None
    if run.failure_reason is not None:
        failure = {"reason": run.failure_reason, "fingerprint": run.failure_fingerprint}
    return {
        "kind": run.kind,
        "run_id": run.run_id,
        "title": run.title,
        "status": run.status.value,
        "attempt": run.attempt,
        "state_token": run.state_token,
        "origin": run.origin,
        "effects": run.effects,
        "budget_s": run.budget_s,
        "expected_s": run.expected_s,
        "lease_s": run.lease_s,
        "started_at": rfc3339(run.started_at),
        "progress_at": rfc3339(run.progress_at),
        "last_seen_at": rfc3339(run.last_seen_at),
        "finished_at": rfc3339(run.finished_at),
        "step": run.step,
        "failure": failure,
        "detail": run.detail,
        "reported_at": rfc3339(run.reported_at),
        "repeats": run.repeats,
        "step_budget_s": run.step_budget_s,
        "step_expected_s": run.step_expected_s,
        "done": run.done,
        "total": run.total,
    }


def run_out(run: PushRun, status_code: int = 200) -> JSONResponse:
    """The answer for one run, serialised once (no second validation of our own output)."""
    return JSONResponse(run_json(run), status_code=status_code)


def _origin(origin: OriginIn | None) -> dict[str, str] | None:
    return None if origin is None else origin.model_dump(exclude_none=True)


@router.post("", status_code=201, response_model=RunOut, dependencies=[Depends(reporter)])
def start_run(body: StartRun, request: Request) -> JSONResponse:
    """Work started. Starting an active run again changes nothing (200); an ended one restarts."""
    new = NewRun(
        kind=body.kind,
        run_id=body.run_id or "",
        title=body.title,
        origin=_origin(body.origin),
        effects=body.effects,
        budget_s=body.budget_s,
        expected_s=body.expected_s,
        lease_s=body.lease_s,
    )
    run, changed = _reports(request).start(new, body.started_at)
    return run_out(run, 201 if changed else 200)


@router.get("", dependencies=[Depends(viewer)])
async def list_runs(
    request: Request,
    all: bool = Query(False, description="also list what finished in the last day"),
    limit: int = Query(500, ge=1, le=10000, description="most runs per section"),
) -> dict[str, Any]:
    """What needs attention, what runs, and (with ``all``) what finished in the last day."""
    overview = await services(request).overview(include_finished=all)
    return overview_json(overview, limit)


class VerdictOut(BaseModel):
    """What the judge says of a run now: its condition and since when."""

    condition: str
    since: datetime
    reason: str
    paged: bool


class DecisionOut(BaseModel):
    """The decision taken on a run's incident."""

    action: str
    by: str
    via: str
    at: datetime


class CardOut(BaseModel):
    """The chat card of a run's incident: how far sending it got (``pending``, ``sending``,
    ``sent``, ``failed``, ``maybe_sent``), where, and the last error."""

    state: str
    channel: str
    message_id: str | None
    error: str | None


class RunDetailOut(RunOut):
    """One run with what the judge says of it: ``verdict`` (``None``: nothing wrong), its
    open ``incident_id``, the ``decision`` taken on it and its chat ``card``."""

    verdict: VerdictOut | None = None
    incident_id: int | None = None
    decision: DecisionOut | None = None
    card: CardOut | None = None


def _judged(overview: Overview, kind: str, run_id: str) -> dict[str, Any] | None:
    """The run's line in the runs list (any section), or ``None`` when it is not listed."""
    sections = (overview.attention, overview.running, overview.dealt_with, overview.finished)
    for section in sections:
        for item in section:
            if (item.run.kind, item.run.run_id) == (kind, run_id):
                where = (kind, run_id)
                return judged_json(
                    item, overview.incidents.get(where), overview.last_seen.get(where)
                )
    return None


def _card(request: Request, incident_id: int | None) -> dict[str, Any] | None:
    """The first card sent about the incident (edits and notes thread under it)."""
    card = None if incident_id is None else services(request).incidents.first_card(incident_id)
    if card is None:
        return None
    return {
        "state": card.status.value,
        "channel": card.channel,
        "message_id": card.platform_message_id,
        "error": card.error,
    }


@router.get("/{kind}/{run_id}", response_model=RunDetailOut, dependencies=[Depends(viewer)])
async def get_run(kind: KindName, run_id: RunId, request: Request) -> JSONResponse:
    """One run: as reported, and what the judge says of it now (verdict, incident, decision,
    card). Runs of kinds read from their own stores carry the runs list's fields instead of
    the reported ones."""
    overview = await services(request).overview_of_run(kind, run_id)
    judged = _judged(overview, kind, run_id)
    try:
        pushed = await run_in_threadpool(_reports(request).get, kind, run_id)
    except NotFound:
        if judged is None:
            raise
        body = dict(judged)
    else:
        body = run_json(pushed)
    seen = judged or {}
    incident_id = seen.get("incident_id")
    body.update(
        verdict=seen.get("verdict"),
        incident_id=incident_id,
        decision=seen.get("decision"),
        card=await run_in_threadpool(_card, request, incident_id),
    )
    return JSONResponse(body)


@router.post("/{kind}/{run_id}/progress", response_model=RunOut, dependencies=[Depends(reporter)])
def progress(
    kind: KindName, run_id: RunId, request: Request, body: Progress | None = Body(None)
) -> JSONResponse:
    """Where the work is: optionally its ``step``, counters (``done`` of ``total``) and the
    step's ``budget_s`` and ``expected_s`` (until the next report). A report that says
    what the one before it said is a repeat, not progress: ``loop_after`` in a row (the
    kind's, default 5) make the run looping."""
    body = body or Progress()
    moved = _reports(request).progress(
        kind,
        run_id,
        body.step,
        body.at,
        done=body.done,
        total=body.total,
        budget_s=body.budget_s,
        expected_s=body.expected_s,
    )
    return run_out(moved)


@router.post("/{kind}/{run_id}/heartbeat", response_model=RunOut, dependencies=[Depends(reporter)])
def heartbeat(kind: KindName, run_id: RunId, request: Request) -> JSONResponse:
    """The owner is alive. Not progress: stalled work stays stalled."""
    return run_out(_reports(request).heartbeat(kind, run_id))


@router.post("/{kind}/{run_id}/waiting", response_model=RunOut, dependencies=[Depends(reporter)])
def waiting(
    kind: KindName, run_id: RunId, request: Request, body: Waiting | None = Body(None)
) -> JSONResponse:
    """The work waits for a person; it is never stalled while it waits."""
    body = body or Waiting()
    return run_out(_reports(request).waiting(kind, run_id, body.reason))


@router.post("/{kind}/{run_id}/finish", response_model=RunOut, dependencies=[Depends(reporter)])
def finish(
    kind: KindName, run_id: RunId, request: Request, body: Finish | None = Body(None)
) -> JSONResponse:
    """The work succeeded."""
    body = body or Finish()
    return run_out(_reports(request).finish(kind, run_id, body.step))


@router.post("/{kind}/{run_id}/fail", response_model=RunOut, dependencies=[Depends(reporter)])
def fail(kind: KindName, run_id: RunId, body: Fail, request: Request) -> JSONResponse:
    """The work failed; the same fingerprint means the same failure."""
    return run_out(_reports(request).fail(kind, run_id, body.reason, body.fingerprint, body.detail))
