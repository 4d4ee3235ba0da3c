"""``/api/v1/procs``: processes the server starts on its own host, parks and wakes.

Starting a process or giving a wake command runs arbitrary commands on the
server's host: admin only. Reporting progress is for reporters, reading for
viewers. ``POST /api/v1/runs/process/{id}/progress`` is served here too, so
``watchkeeper report progress process`` reaches a process run.

A command line on another host records the runs it starts here and reports them
(``POST /api/v1/procs/reported``, then ``POST .../{id}/report``: its owner, its
output, its end; see :mod:`watchkeeper.procs.mirror`). That runs nothing on the
server's host: reporters may.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx
from fastapi import APIRouter, Body, Depends, FastAPI, HTTPException, Query, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from watchkeeper.access.tokens import Role, TokenInfo
from watchkeeper.errors import InvalidInput
from watchkeeper.redact import MAX_LINE_BYTES, redact, redact_bytes
from watchkeeper.server.api.events import stopping_of
from watchkeeper.server.api.fields import Int32, Line, Moment, Text
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.api.schemas import STEP_MAX, OriginIn, RunId, ShortText, StepProgress
from watchkeeper.server.deps import made_once, services
from watchkeeper.server.http.auth import admin, reporter, viewer
from watchkeeper.server.http.longpoll import (
    RETRY_AFTER_S,
    Hold,
    LongWaits,
    long_waits_of,
    unless_set,
)

router = APIRouter(tags=["procs"], responses=ERRORS)
PREFIX = "/api/v1/procs"
#: Longest a ``wait`` request holds its connection; clients ask again.
MAX_WAIT_S = 30.0
#: Aborts waiting out their grace period that one token, and the server, may have at once.
ABORTS_PER_TOKEN = 8
ABORTS_TOTAL = 32
#: Longest single argument Linux passes to a program (``MAX_ARG_STRLEN``).
ARG_MAX = 128 * 1024
#: Most output one ``log`` request from an offset answers (more than the longest line kept
#: whole for the redactor, ``MAX_LINE_BYTES``).
LOG_PIECE_MAX = 1024 * 1024


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartProc(_Body):
    """``POST /api/v1/procs``: start a command on the server's host."""

    argv: list[Annotated[str, Text(ARG_MAX)]] = Field(min_length=1, max_length=1000)
    cwd: Annotated[str, Line(4096)] | None = None
    name: Annotated[str, Line(200)] | None = None
    detach: bool = True
    budget_s: float | None = Field(default=None, gt=0, le=30 * 86400)
    timeout_s: float | None = Field(default=None, gt=0, le=30 * 86400)
    origin: OriginIn | None = None
    session: ShortText | None = None
    on_done_cmd: Annotated[str, Text(4000)] | None = None
    on_done_url: Annotated[str, Line(2000, pattern=r"^https?://")] | None = None

    @field_validator("on_done_url")
    @classmethod
    def _sendable(cls, url: str | None) -> str | None:
        """A hook URL must be one a client can send to, not only start like one."""
        if url is None:
            return None
        try:
            host = httpx.URL(url).host
        except httpx.InvalidURL as exc:
            raise ValueError(
                f"not a URL a request can be sent to ({exc}); send http(s)://host/path"
            ) from None
        if not host:
            raise ValueError("the URL names no host; send http(s)://host/path")
        return url


class _ReportedRun(_Body):
    """``POST /api/v1/procs/reported``: a run another engine starts on its host, and reports."""

    id: RunId
    name: Annotated[str, Line(200, min_length=1)]
    argv: list[Annotated[str, Text(ARG_MAX)]] = Field(min_length=1, max_length=1000)
    cwd: Annotated[str, Line(4096, min_length=1)]
    host: Annotated[str, Line(255, min_length=1)]
    user: Annotated[str, Line(100, min_length=1)]
    boot_id: Annotated[str, Line(64)] | None = None
    detach: bool = False
    budget_s: float | None = Field(default=None, gt=0, le=30 * 86400)
    timeout_s: float | None = Field(default=None, gt=0, le=30 * 86400)
    origin: OriginIn | None = None
    session: ShortText | None = None
    engine_key: Annotated[str, Line(4096, min_length=1)]


class _StartedIn(_Body):
    shim_pid: Int32
    shim_start: Annotated[str, Line(40, min_length=1)]
    pid: Int32
    pid_start: Annotated[str, Line(40, min_length=1)]
    pgid: Int32


class _EndedIn(_Body):
    status: Literal["succeeded", "failed", "cancelled"]
    exit_code: Int32 | None = None
    signal: Int32 | None = None
    reason: Annotated[str, Text(2000)] | None = None
    finished_at: Moment | None = None


class _OutputIn(_Body):
    offset: int = Field(ge=0, le=2**62)
    #: At most 96 KiB of output, base64.
    data: str = Field(max_length=131072)


class _RunReport(_Body):
    """``POST .../{id}/report``: what the engine that reports a run says it did."""

    engine_key: Annotated[str, Line(4096, min_length=1)]
    started: _StartedIn | None = None
    output: _OutputIn | None = None
    ended: _EndedIn | None = None


class AbortProc(_Body):
    """``POST .../abort``."""

    grace_s: float | None = Field(default=None, ge=0, le=600)


class ParkIn(_Body):
    """``POST /api/v1/procs/parks``: a session hands back, waiting on a run."""

    session: Annotated[str, Line(200, min_length=1)]
    reason: Annotated[str, Text(STEP_MAX, min_length=1)]
    until: RunId
    wake_cmd: Annotated[str, Text(4000)] | None = None
    progress: Annotated[str, Text(STEP_MAX)] | None = None


class SessionProgress(_Body):
    """``POST /api/v1/procs/sessions/{session}/progress``."""

    note: Annotated[str, Text(STEP_MAX)] | None = None


def abort_caps_of(app: FastAPI) -> LongWaits:
    """The caps on aborts in their grace period: ``app.state.abort_waits``, made on first use."""
    return made_once(
        app, "abort_waits", LongWaits, lambda: LongWaits(ABORTS_PER_TOKEN, ABORTS_TOTAL)
    )


def _abort_place(app: FastAPI, holder: int) -> Hold:
    """A place for one abort of token ``holder``, or ``429`` saying which cap is reached."""
    caps = abort_caps_of(app)
    try:
        return caps.acquire(holder)
    except HTTPException as refused:
        if caps.held_by(holder) >= caps.per_token:
            message = (
                f"this token already has {caps.per_token} aborts waiting out their grace "
                f"period, the most one token may have at once: retry in {RETRY_AFTER_S} s"
            )
        else:
            message = (
                f"the server already has {caps.total} aborts waiting out their grace "
                f"period, the most it keeps at once: retry in {RETRY_AFTER_S} s"
            )
        raise HTTPException(429, message, headers=refused.headers) from None


@router.get(PREFIX, dependencies=[Depends(viewer)])
def list_procs(
    request: Request,
    all: bool = Query(False, description="also list runs that ended in the last day"),
    limit: int = Query(500, ge=1, le=10000),
) -> dict[str, Any]:
    """Process runs, newest first."""
    engine = services(request).procs
    runs = engine.runs(include_finished=all, limit=limit)
    return {"runs": [engine.describe(run) for run in runs]}


@router.post(PREFIX, status_code=201, dependencies=[Depends(admin)])
def start_proc(body: StartProc, request: Request) -> dict[str, Any]:
    """Record a run, then start it detached on the server's host."""
    from watchkeeper.procs.launch import LaunchRequest

    if not body.detach:
        raise InvalidInput(
            "the server starts detached runs only: send detach=true and wait on the run",
            "detach",
        )
    engine = services(request).procs
    request_ = LaunchRequest(
        argv=tuple(body.argv),
        cwd=body.cwd or os.getcwd(),
        name=body.name,
        detach=True,
        budget_s=body.budget_s,
        timeout_s=body.timeout_s,
        origin=None if body.origin is None else body.origin.model_dump(exclude_none=True),
        session=body.session,
        on_done_cmd=body.on_done_cmd,
        on_done_url=body.on_done_url,
    )
    launched = engine.start(request_)
    return engine.describe(launched.run)


@router.get(f"{PREFIX}/parks", dependencies=[Depends(viewer)])
def list_parks(request: Request) -> dict[str, Any]:
    """Parked sessions, what each waits on, and which became wakeable."""
    return {"parks": [view.as_dict() for view in services(request).procs.parked()]}


@router.post(f"{PREFIX}/parks", status_code=201)
def park(body: ParkIn, request: Request, token: TokenInfo = Depends(reporter)) -> dict[str, Any]:
    """Record that a session handed back, waiting on a run."""
    if body.wake_cmd and not token.role.allows(Role.ADMIN):
        raise HTTPException(
            403, "a wake command runs on the server's host: it needs an admin token"
        )
    parked = services(request).procs.park(
        body.session, body.reason, body.until, wake_cmd=body.wake_cmd, progress=body.progress
    )
    return {
        "id": parked.id,
        "session": parked.session,
        "until": parked.until_run,
        "state": parked.state.value,
    }


@router.post(f"{PREFIX}/sessions/{{session}}/progress", dependencies=[Depends(reporter)])
def session_progress(
    session: ShortText, request: Request, body: SessionProgress | None = Body(None)
) -> dict[str, Any]:
    """Record the session's own progress note; ``released`` is 0, as its word resets no breaker.

    Only what the engine sees the watched run do (a log line, its end) releases
    held wakes: a looping session reports progress every round.
    """
    released = services(request).procs.session_progress(session, (body or SessionProgress()).note)
    return {"session": session, "released": released}


@router.post(f"{PREFIX}/reported", status_code=201, dependencies=[Depends(reporter)])
def record_reported(body: _ReportedRun, request: Request) -> dict[str, Any]:
    """Record a run another engine starts on its own host and reports here.

    The same run sent again (its answer was lost) is answered as it is.
    """
    from watchkeeper.records.procs import NewProc

    new = NewProc(
        run_id=body.id,
        name=body.name,
        argv=tuple(body.argv),
        cwd=body.cwd,
        host=body.host,
        user=body.user,
        boot_id=body.boot_id,
        detach=body.detach,
        budget_s=body.budget_s,
        timeout_s=body.timeout_s,
        session=body.session,
        origin=None if body.origin is None else body.origin.model_dump(exclude_none=True),
    )
    engine = services(request).procs
    return engine.describe(engine.record_reported(new, body.engine_key))


@router.post(f"{PREFIX}/{{run_id}}/report", dependencies=[Depends(reporter)])
def report(run_id: RunId, body: _RunReport, request: Request) -> dict[str, Any]:
    """What the engine that reports a run says it did: the run's owner once it started,
    output from ``offset``, its end; each report also says that engine is still there.

    ``next_offset`` is the size of the run's log here, where the next output goes;
    ``abort_requested`` asks the engine to end the run.
    """
    from watchkeeper.procs.mirror import Ended, Report
    from watchkeeper.records.procs import ProcStatus, Started

    output = None
    if body.output is not None:
        try:
            output = (body.output.offset, base64.b64decode(body.output.data, validate=True))
        except (binascii.Error, ValueError):  # ValueError: characters outside ASCII
            raise InvalidInput("output.data: send the output's bytes in base64", "output") from None
    started = None if body.started is None else Started(**body.started.model_dump())
    ended = None
    if body.ended is not None:
        ended = Ended(
            ProcStatus(body.ended.status),
            body.ended.exit_code,
            body.ended.signal,
            body.ended.reason,
            body.ended.finished_at,
        )
    said = Report(body.engine_key, started, output, ended)
    run, size = services(request).procs.take_report(run_id, said)
    asked = run.abort_requested_at is not None and not run.status.ended
    return {"id": run_id, "status": run.status.value, "next_offset": size, "abort_requested": asked}


@router.post(f"{PREFIX}/reclaim", dependencies=[Depends(admin)])
def reclaim(request: Request) -> dict[str, Any]:
    """Settle the server host's runs now: witnesses, stale runs, timeouts."""
    report = services(request).procs.reap()
    return {
        "collected": report.collected,
        "reclaimed": report.reclaimed,
        "timed_out": report.timed_out,
    }


@router.get(f"{PREFIX}/{{run_id}}", dependencies=[Depends(viewer)])
def get_proc(run_id: RunId, request: Request) -> dict[str, Any]:
    """One run, with its status as it really is."""
    return services(request).procs.status(run_id)


@router.get(f"{PREFIX}/{{run_id}}/log", dependencies=[Depends(viewer)])
def get_log(
    run_id: RunId,
    request: Request,
    tail_bytes: int = Query(65536, ge=1, le=4 * 1024 * 1024),
    offset: int | None = Query(
        None, ge=0, description="the output from this byte on (a follower's `next_offset`)"
    ),
    whole_lines: bool = Query(
        True, description="false: also the unfinished last line, for a reader that stops here"
    ),
) -> dict[str, Any]:
    """The run's output, secrets redacted: its end, or (``offset``) what follows that byte.

    From ``offset``, up to 1 MiB is answered, cut after the last complete line
    while the run goes on (``whole_lines``), so a secret written in two pieces
    is redacted whole; ``next_offset`` is where to ask next and ``ended`` says
    the run has ended, so a follower stops once ``next_offset`` reaches ``size``.
    """
    from watchkeeper.procs.layout import read_tail

    engine = services(request).procs
    # The run's state is read before its log: a run that had ended then has its whole log.
    ended = engine.get(run_id).status.ended
    path = engine.log_path(run_id)
    size = path.stat().st_size if path.exists() else 0
    if offset is None:
        text = redact(read_tail(path, tail_bytes))
        return {"id": run_id, "size": size, "next_offset": size, "ended": ended, "text": text}
    piece = _log_piece(path, offset)
    final = not whole_lines or (ended and offset + len(piece) >= size)
    cut = _whole_lines(piece, final=final)
    return {
        "id": run_id,
        "size": size,
        "offset": offset,
        "next_offset": offset + cut,
        "ended": ended,
        "text": redact_bytes(piece[:cut]).decode("utf-8"),
    }


def _log_piece(path: Path, offset: int) -> bytes:
    """At most :data:`LOG_PIECE_MAX` bytes of the file from ``offset`` (nothing if missing)."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read(LOG_PIECE_MAX)
    except FileNotFoundError:
        return b""


def _whole_lines(piece: bytes, *, final: bool) -> int:
    """How much of ``piece`` to answer: up to its last line end, unless it is the last piece.

    A line longer than the redactor waits for (``MAX_LINE_BYTES``) goes as it is,
    as it does in a local read, or a follower would never move on.
    """
    if final:
        return len(piece)
    # A carriage return ends a line too: progress bars redraw with it and never print "\n".
    cut = max(piece.rfind(b"\n"), piece.rfind(b"\r")) + 1
    return len(piece) if cut == 0 and len(piece) >= MAX_LINE_BYTES else cut


@router.get(f"{PREFIX}/{{run_id}}/wait")
async def wait(
    run_id: RunId,
    request: Request,
    timeout_s: float = Query(MAX_WAIT_S, ge=0, le=MAX_WAIT_S),
    token: TokenInfo = Depends(viewer),
) -> dict[str, Any]:
    """Hold the request until the run ends or ``timeout_s`` passes; ask again if still active.

    The wait runs on the event loop and holds no worker thread; each token, and
    the server, hold only so many at once (``429`` with ``Retry-After`` past that).
    """
    engine = services(request).procs
    async with long_waits_of(request.app).acquire(token.id):
        waited = engine.wait_async(run_id, timeout_s=timeout_s)
        run = await unless_set(stopping_of(request.app), waited)
    if run is None:  # the server is stopping: answer with the run as it is now
        run = await engine.refresh_async(run_id)
    return await asyncio.to_thread(engine.describe, run)


@router.post(f"{PREFIX}/{{run_id}}/abort")
async def abort(
    run_id: RunId,
    request: Request,
    body: AbortProc | None = Body(None),
    token: TokenInfo = Depends(admin),
) -> dict[str, Any]:
    """SIGTERM the run's group, SIGKILL after the grace period; never what is not ours.

    The grace period is waited out on the event loop, holding no worker thread;
    aborts have caps of their own, per token and in total (``429`` past them),
    apart from the long-polls' so a client holding its share of waits can still abort.
    """
    engine = services(request).procs
    async with _abort_place(request.app, token.id):
        result = await engine.abort_async(run_id, grace_s=(body or AbortProc()).grace_s)
    described = await asyncio.to_thread(engine.describe, result.run)
    return {"outcome": result.outcome.value, "detail": result.detail, "run": described}


@router.post(f"{PREFIX}/{{run_id}}/progress", dependencies=[Depends(reporter)])
@router.post("/api/v1/runs/process/{run_id}/progress", dependencies=[Depends(reporter)])
def progress(
    run_id: RunId, request: Request, body: StepProgress | None = Body(None)
) -> dict[str, Any]:
    """Something moved in a process run (optionally: which step)."""
    engine = services(request).procs
    return engine.describe(engine.progress(run_id, (body or StepProgress()).step))
