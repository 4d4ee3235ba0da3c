"""``/api/v1/events/batch``, ``/api/v1/timeline``, ``/api/v1/spend`` and job records.

Reporters send timeline events in batches of up to 5,000, stored all or
nothing: one bad event refuses the batch with a 4xx naming its index and
field. A body may be gzip-compressed (``Content-Encoding: gzip``), which is
how the SDK sends it: the server's body limit applies to the bytes sent.
Viewers read timelines, spend and signed execution records, and have a
record file checked against the server's key. A running
task's own token (``$WATCHKEEPER_TOKEN`` in its environment) may send events
about its own task only; its task, job and org are filled in when left out.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from starlette.concurrency import run_in_threadpool

from watchkeeper.access.tokens import TaskToken, TokenInfo
from watchkeeper.clock import rfc3339
from watchkeeper.errors import InvalidInput, WatchkeeperError
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.server.api.fields import Count32, Line, Moment, Text
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import services
from watchkeeper.server.http.auth import own_task_only, reporter_or_task, viewer
from watchkeeper.server.http.errors import error_response
from watchkeeper.timeline import record
from watchkeeper.timeline.service import MAX_BATCH

router = APIRouter(tags=["timeline"], responses=ERRORS)
#: Decompressed bodies are capped too: a small gzip body must not expand without bound.
MAX_INFLATED_BYTES = 32 * 1024 * 1024
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MODEL = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$"
# Queue ids (``j-...``, ``t-...``) or any other reporter's own ids, as stored (64 characters).
Ident = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,63}$")]
Phase = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.-]{0,31}$")]
Word = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")]
Org = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")]
Model = Annotated[str, StringConstraints(pattern=_MODEL)]
Provider = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")]
Fingerprint = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9:._+/=-]{1,128}$")]
# Each count is an INTEGER column: one event beyond two billion tokens is refused.
Tokens = Count32


class EventIn(BaseModel):
    """One timeline event. ``input_tokens`` counts every input token, cached ones included."""

    model_config = ConfigDict(extra="forbid")

    phase: Phase = Field(description="round_start, implementer, tool, review, verify, ...")
    at: Moment | None = Field(default=None, description="when the phase ended")
    org: Org | None = None
    job_id: Ident | None = None
    task_id: Ident | None = None
    round: int | None = Field(default=None, ge=0, le=1_000_000)
    fingerprint: Fingerprint | None = Field(default=None, description="the round's progress")
    outcome: Word | None = None
    duration_s: float | None = Field(default=None, ge=0, le=30 * 86400)
    name: Annotated[str, Line(200)] | None = Field(default=None, description="agent or tool name")
    role: Word | None = Field(default=None, description="architect, implementer, reviewer")
    model: Model | None = None
    provider: Provider | None = Field(default=None, description="where the call actually ran")
    input_tokens: Tokens = 0
    output_tokens: Tokens = 0
    cache_read_tokens: Tokens = 0
    cache_write_tokens: Tokens = 0
    # Longer texts are accepted, then redacted and capped before they are stored.
    rationale: Annotated[str, Text(64 * 1024)] | None = None
    detail: Annotated[str, Text(64 * 1024)] | None = None

    @field_validator("cache_read_tokens", "cache_write_tokens")
    @classmethod
    def _cache_within_input(cls, value: int, info: ValidationInfo) -> int:
        cached = value + (
            info.data.get("cache_read_tokens", 0) if info.field_name == "cache_write_tokens" else 0
        )
        if cached > info.data.get("input_tokens", 0):
            raise ValueError(
                "cached tokens exceed input_tokens: input_tokens counts every input token, "
                "cached ones included"
            )
        return value

    def new(self) -> NewEvent:
        """As the timeline service takes it."""
        usage = Usage(
            self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens
        )
        fields = self.model_dump(
            exclude={"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}
        )
        return NewEvent(**fields, usage=usage)


class Batch(BaseModel):
    """``POST /api/v1/events/batch``."""

    model_config = ConfigDict(extra="forbid")

    events: list[EventIn] = Field(min_length=1, max_length=MAX_BATCH)


def record_key(request: Request) -> record.RecordKeys:
    """The server's record keys (the runtime reads, or makes, them once)."""
    return services(request).record_keys


def _inflate(body: bytes, encoding: str) -> bytes:
    if encoding not in ("gzip", "deflate"):
        raise ValueError(f"Content-Encoding {encoding!r} is not supported: send gzip or nothing")
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        inflated = inflater.decompress(body, MAX_INFLATED_BYTES)
    except zlib.error as exc:
        raise ValueError(f"the body is not valid {encoding}: {exc}") from None
    if inflater.unconsumed_tail:
        raise ValueError(f"the body inflates to more than {MAX_INFLATED_BYTES} bytes; send less")
    return inflated


def _refusal(exc: ValidationError) -> JSONResponse:
    problem = exc.errors()[0]
    location = [str(part) for part in problem["loc"]]
    if problem["type"] == "json_invalid":
        message = f"the body is not valid JSON: {problem['msg']}"
        return error_response(400, "malformed_json", message)
    body: dict[str, Any] = {
        "code": "invalid",
        "field": ".".join(location) or "body",
        "message": f"{'.'.join(location) or 'body'}: "
        + str(problem["msg"]).removeprefix("Value error, "),
    }
    if len(location) >= 2 and location[0] == "events" and location[1].isdigit():
        index = int(location[1])
        body["index"] = index
        body["field"] = ".".join(location[2:]) or "event"
        body["message"] = f"event {index}, {body['field']}: " + str(problem["msg"]).removeprefix(
            "Value error, "
        )
    return JSONResponse({"error": body}, status_code=422)


def _about_own_task(request: Request, token: TaskToken, events: list[NewEvent]) -> list[NewEvent]:
    """A task token's events, each held to its own task, job and org (403 otherwise)."""
    for index, event in enumerate(events):
        own_task_only(token, event.task_id, event.job_id, f"event {index}")
    org = services(request).queue.task(token.task_id).org
    for index, event in enumerate(events):
        if event.org is not None and event.org != org:
            raise HTTPException(
                403,
                f"event {index}: task {token.task_id} counts against org {org}, "
                f"not {event.org!r}; leave org out",
            )
    return [
        dataclasses.replace(event, task_id=token.task_id, job_id=token.job_id, org=org)
        for event in events
    ]


@router.post("/api/v1/events/batch", status_code=201, response_model=None)
async def ingest(
    request: Request, token: TokenInfo | TaskToken = Depends(reporter_or_task)
) -> dict[str, Any] | JSONResponse:
    """Store a batch of timeline events (all or nothing), priced and redacted."""
    raw = await request.body()
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding and encoding != "identity":
        try:
            raw = _inflate(raw, encoding)
        except ValueError as exc:
            return error_response(400, "bad_encoding", str(exc))
    try:
        batch = Batch.model_validate_json(raw)
    except ValidationError as exc:
        return _refusal(exc)
    events = [event.new() for event in batch.events]
    if isinstance(token, TaskToken):
        events = await run_in_threadpool(_about_own_task, request, token, events)
    service = services(request).timeline
    done = await run_in_threadpool(service.ingest, events, token.name)
    return done.as_dict()


@router.get("/api/v1/timeline", dependencies=[Depends(viewer)])
def read_timeline(
    request: Request,
    job_id: Ident | None = Query(None),
    task_id: Ident | None = Query(None),
    limit: int = Query(10_000, ge=1, le=100_000),
) -> dict[str, Any]:
    """Events of a job or task, oldest first; a task's answer says when it last progressed."""
    if job_id is None and task_id is None:
        return {"events": []}
    service = services(request).timeline
    body: dict[str, Any] = {
        "events": [e.as_dict() for e in service.events(job_id=job_id, task_id=task_id, limit=limit)]
    }
    if task_id is not None:
        body["last_progress_at"] = rfc3339(service.last_progress_at(task_id))
    return body


def range_end(name: str, value: str | None) -> datetime | None:
    """One end of a spend range: a date is that whole UTC day, a time that instant."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if _DATE.match(text):
            day = datetime.combine(date.fromisoformat(text), time(), UTC)
            return day + timedelta(days=1) if name == "until" else day
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"{name} {value!r} is not a date or a time: write a date (2026-01-05) or a time "
            "in RFC 3339 (2026-01-05T12:00:00Z)",
            name,
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def spend_range(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``since`` and ``until`` as the spend API and the dashboard read them.

    A date (``2026-01-05``) is a whole UTC day: ``since`` counts from its start and
    ``until`` up to its end, so ``since=2026-01-05&until=2026-01-05`` is that one day. A
    time (RFC 3339; naive: UTC) is that instant, ``since`` included and ``until`` left
    out. :class:`InvalidInput` says what was wrong and how to write it.
    """
    after, before = range_end("since", since), range_end("until", until)
    if after is not None and before is not None and before <= after:
        raise InvalidInput("until must be later than since", "until")
    return after, before


@router.get("/api/v1/spend", dependencies=[Depends(viewer)])
def read_spend(
    request: Request,
    by: str = Query("model", description="org, job, role, model, provider or day"),
    org: Org | None = Query(None),
    job_id: Ident | None = Query(None),
    since: Annotated[str, Line(40)] | None = Query(
        None, description="calls made from this date (its start, UTC) or time (RFC 3339) on"
    ),
    until: Annotated[str, Line(40)] | None = Query(
        None, description="calls made up to this date (its end, UTC) or before this time"
    ),
) -> dict[str, Any]:
    """Spend grouped by one key, costliest first, with totals and the unpriced count."""
    after, before = spend_range(since, until)
    report = services(request).timeline.spend(by, org=org, job_id=job_id, since=after, until=before)
    return report.as_dict()


@router.get("/api/v1/jobs/{job_id}/record", dependencies=[Depends(viewer)])
def job_record(job_id: Ident, request: Request) -> dict[str, Any]:
    """The signed execution record of a finished job."""
    found = services(request)
    return found.timeline.record(job_id, found.queue.find_job(job_id), record_key(request))


class VerdictOut(BaseModel):
    """``POST /api/v1/records/verify``: whether the record is authentic, and if not, why."""

    valid: bool
    reason: str


@router.post(
    "/api/v1/records/verify",
    response_model=VerdictOut,
    dependencies=[Depends(viewer)],
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "a record as `watchkeeper record --out` writes it",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
async def verify_record(request: Request) -> VerdictOut | JSONResponse:
    """Check a record's signatures with this server's record key (bodies up to the usual limit)."""
    raw = await request.body()
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return error_response(400, "malformed_json", f"the body is not valid JSON: {exc}")
    if not isinstance(parsed, dict):
        return error_response(
            422,
            "invalid",
            "the body must be a JSON object: a record as `watchkeeper record --out` writes it",
            field="body",
        )
    return await run_in_threadpool(_verdict, request, raw, parsed)


def _verdict(request: Request, raw: bytes, parsed: dict[str, Any]) -> VerdictOut:
    """The signatures, then (for a record of this server) whether its events still match."""
    keys = record_key(request)
    try:
        verdict = record.verify(raw, keys.public_key, keys.legacy)
        if not verdict.valid or parsed["signature"].get("algorithm") != record.ALGORITHM:
            return VerdictOut(valid=verdict.valid, reason=verdict.reason)
        found = services(request)
        job_id = str(parsed["job"]["id"])
        if not found.timeline.still_matches(parsed, found.queue.find_job(job_id)):
            why = (
                "the signature matches, but the job's timeline no longer does: its events "
                "were changed after the record was signed"
            )
            return VerdictOut(valid=False, reason=why)
    except (AttributeError, TypeError, ValueError, KeyError):
        # A field of the wrong type deep inside (a link that is not an object) is not a record.
        reason = "not a watchkeeper execution record: a field has the wrong type"
        return VerdictOut(valid=False, reason=reason)
    except WatchkeeperError:
        pass  # the job cannot be assembled now (running again): the signature is the answer
    return VerdictOut(valid=verdict.valid, reason=verdict.reason)


class PublicKeyOut(BaseModel):
    """``GET /api/v1/records/key``: what anyone checks this server's records with."""

    algorithm: str
    public_key: str
    key_id: str


@router.get("/api/v1/records/key", response_model=PublicKeyOut)
def record_public_key(request: Request) -> PublicKeyOut:
    """The public key execution records are signed with (Ed25519, hex): no token needed.

    ``watchkeeper verify-record FILE --public-key HEX`` checks a record with it, offline.
    """
    return PublicKeyOut(**record_key(request).published())
