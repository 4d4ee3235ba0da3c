"""Topology (fleets, runners, breakers, health) and process runs with their logs."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from watchkeeper.errors import NotFound, WatchkeeperError
from watchkeeper.queue.views import task_json
from watchkeeper.redact import redact, redact_bytes, whole_lines
from watchkeeper.server.api.events import stopping_of
from watchkeeper.server.api.fields import INT64_MAX
from watchkeeper.server.api.schemas import RUN_ID_PATTERN, RunId
from watchkeeper.server.deps import services
from watchkeeper.server.http.longpoll import held_stream, sse_event, unless_set
from watchkeeper.server.web import charts
from watchkeeper.server.web.common import acting_form, answer, local_path, page
from watchkeeper.server.web.routes_home import chrome, detail_page, page_session
from watchkeeper.server.web.session import Session, session
from watchkeeper.server.web.stream import STREAM_S
from watchkeeper.watch.sweeper import Sweeper

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)
#: How much of a log the page shows at first; the rest follows live.
LOG_TAIL_BYTES = 64 * 1024
LOG_POLL_S = 0.5
_DIAL = {"healthy": 1.0, "degraded": 0.55, "unhealthy": 0.15}


# Topology ---------------------------------------------------------------------------


def _breakers(request: Request, nodes: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """Circuit breakers a process registered on ``app.state.breakers`` (name to breaker),
    each with the node of the server's tree that calls through it (``nodes``), if known."""
    found = getattr(request.app.state, "breakers", None) or {}
    shown = []
    for name, breaker in sorted(dict(found).items()):
        stats = breaker.statistics()
        shown.append(
            {
                "name": name,
                "state": stats.state.value.replace("_", "-"),
                "failures": stats.failures,
                "successes": stats.successes,
                "rejections": stats.rejections,
                "node": nodes.get(name),
            }
        )
    return shown


def _supervision(request: Request) -> dict[str, Any] | None:
    """The server's own supervision (its tree, breakers and checks), when it has one."""
    found = getattr(request.app.state, "supervision", None)
    if found is None:
        return None
    snapshot: dict[str, Any] = found.snapshot()
    return snapshot


def tree_picture(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A supervision tree drawn top-down: the supervisor, then each child below it on an
    elbow line, one row each (narrow enough for a phone)."""
    row, left, width = 40, 28, 360
    children = list(tree["children"])
    nodes = [{"x": 4, "y": 4, "w": width - 8, "node": tree, "root": True}]
    lines = []
    for i, child in enumerate(children, start=1):
        y = 4 + i * row
        nodes.append({"x": left + 8, "y": y, "w": width - left - 12, "node": child, "root": False})
        lines.append((left - 8, y - row + 30, left - 8, y + 15))
        lines.append((left - 8, y + 15, left + 8, y + 15))
    return {"width": width, "height": 8 + (len(children) + 1) * row, "nodes": nodes, "lines": lines}


def _server_checks(sweeper: Sweeper) -> list[dict[str, Any]]:
    """The server's own ``/healthz`` checks: supervision, then each kind's readability."""
    health = sweeper.health
    checks = [
        {
            "name": "supervision",
            "status": "healthy" if health.working else "unhealthy",
            "detail": health.last_error or "sweeps succeed",
        }
    ]
    latest = sweeper.latest
    for read in () if latest is None else latest.reads:
        checks.append(
            {
                "name": f"kind {read.kind}",
                "status": "healthy" if read.readable else "unhealthy",
                "detail": read.error or f"read in {read.duration_s * 1000:.0f} ms",
            }
        )
    return checks


async def _monitor_checks(request: Request) -> list[dict[str, Any]]:
    """Checks of a health monitor registered on ``app.state.health_monitor``, if any."""
    monitor = getattr(request.app.state, "health_monitor", None)
    if monitor is None:
        return []
    from watchkeeper.supervise.health_http import health_payload

    _code, body = health_payload(monitor)
    checks: Mapping[str, Mapping[str, Any]] = body["checks"]  # type: ignore[assignment]
    return [
        {"name": name, "status": c["status"], "detail": c["detail"]} for name, c in checks.items()
    ]


def _topology_context(request: Request) -> dict[str, Any]:
    queue = services(request).queue
    shape = queue.topology()
    tasks = queue.running_tasks()
    marks = queue.marks(tasks)
    running = {task.id: task_json(task, {}, marks) for task in tasks}
    try:
        engine = services(request).procs
        procs = [engine.describe(run) for run in engine.runs(limit=20)]
    except WatchkeeperError as exc:
        log.warning("Process runs not shown: %s", exc, extra={"action": "web_topology"})
        procs = []
    # A runner that stopped beating stays listed for days (GET /api/v1/runners); drawn, it
    # would crowd the live ones the picture is for.
    live = [runner for runner in shape["runners"] if runner["alive"]]
    picture = charts.topology(shape["fleets"], live, procs, running)
    return {
        "topology": shape,
        "picture": picture,
        "procs": procs,
        "running": running,
        "live_runners": len(live),
        "gone_runners": len(shape["runners"]) - len(live),
    }


async def topology_context(request: Request) -> dict[str, Any]:
    """The whole topology page's data, read in a thread."""
    context = await asyncio.to_thread(_topology_context, request)
    checks = _server_checks(services(request).sweeper) + await _monitor_checks(request)
    supervision = _supervision(request)
    nodes: dict[str, str | None] = {}
    trees = []
    if supervision is not None:
        nodes = {c["name"]: c["node"] for c in supervision["health"]}
        trees = [{**tree, "picture": tree_picture(tree)} for tree in supervision["trees"]]
    for check in checks:
        check["dial"] = charts.dial(_DIAL.get(str(check["status"]), 0.0))
        check.setdefault("node", nodes.get(str(check["name"])))
    breaker_nodes = {b["name"]: b["node"] for b in (supervision or {}).get("breakers", [])}
    return {
        **context,
        "breakers": _breakers(request, breaker_nodes),
        "checks": checks,
        "trees": trees,
    }


@router.get("/web/topology", response_class=HTMLResponse)
async def topology_page(request: Request, current: Session = Depends(page_session)) -> HTMLResponse:
    """Fleets and their runners, each running task on its runner, processes beside."""
    return page(
        request,
        "topology.html",
        current,
        **await topology_context(request),
        **await chrome(request),
        title="Topology",
    )


@router.get("/web/fragments/topology", response_class=HTMLResponse)
async def topology_fragment(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """The topology picture alone, for live updates."""
    return page(request, "_topology.html", current, **await topology_context(request))


# Process runs ------------------------------------------------------------------------


def _shown(described: dict[str, Any]) -> dict[str, Any]:
    """A run as a page shows it: a command line can carry a secret (``--token=...``)."""
    return {**described, "argv": [redact(" ".join(described["argv"]))]}


def _procs_context(request: Request) -> dict[str, Any]:
    engine = services(request).procs
    runs = [_shown(engine.describe(run)) for run in engine.runs(include_finished=True, limit=200)]
    parks = [view.as_dict() for view in engine.parked()]
    return {"runs": runs, "parks": parks}


@router.get("/web/procs", response_class=HTMLResponse)
async def procs_page(request: Request, current: Session = Depends(page_session)) -> HTMLResponse:
    """Process runs (active and of the last day) and parked sessions."""
    context = await asyncio.to_thread(_procs_context, request)
    return page(
        request, "procs.html", current, **context, **await chrome(request), title="Processes"
    )


@router.get("/web/fragments/procs", response_class=HTMLResponse)
async def procs_fragment(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """Process runs and parked sessions alone, for live updates."""
    context = await asyncio.to_thread(_procs_context, request)
    return page(request, "_procs.html", current, **context)


def _proc_context(request: Request, run_id: str) -> dict[str, Any]:
    engine = services(request).procs
    refreshed = engine.refresh(run_id)
    path = engine.log_path(run_id)
    begin, text = 0, b""
    if path.exists():
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            begin = handle.seek(max(0, size - LOG_TAIL_BYTES))
            text = handle.read(size - begin)
        if begin:
            # Only whole lines are redacted reliably: drop the piece of line the tail began in.
            cut = text.find(b"\n") + 1
            begin, text = begin + cut, text[cut:]
        # An unfinished last line is left to the live stream, which redacts it once complete.
        text = text[: whole_lines(text, final=refreshed.status.ended)]
    return {
        "run": _shown(engine.describe(refreshed)),
        "log": redact_bytes(text).decode("utf-8"),
        "log_size": begin + len(text),
    }


def _proc_context_of(request: Request, run_id: str) -> dict[str, Any]:
    if not re.match(RUN_ID_PATTERN, run_id):
        raise NotFound(f"no process run {run_id!r}: see the processes list")
    return _proc_context(request, run_id)


@router.get("/web/procs/{run_id}", response_class=HTMLResponse)
async def proc_page(
    request: Request, run_id: str, current: Session = Depends(page_session)
) -> HTMLResponse:
    """One process run: its status, its log (following live), and Abort for admins.

    An id that could name no run gets the not-found page, like one that names none.
    """
    read = functools.partial(_proc_context_of, request, run_id)
    return await detail_page(request, current, "proc.html", f"Process {run_id}", read)


def _read_from(request: Request, run_id: str, offset: int) -> tuple[bytes, bool, str]:
    engine = services(request).procs
    run = engine.refresh(run_id)
    path = engine.log_path(run_id)
    chunk = b""
    if path.exists():
        with path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read(LOG_TAIL_BYTES)
    return chunk, run.status.ended, engine.effective_status(run)


@router.get("/web/procs/{run_id}/log")
async def follow_log(
    request: Request,
    run_id: RunId,
    offset: int = Query(0, ge=0, le=INT64_MAX),
    current: Session = Depends(session),
) -> Response:
    """Server-sent events: what the log gains (redacted), then ``end`` with the status.

    Each event's id is the byte offset read so far, so a reconnecting browser
    (a stream lasts at most :data:`STREAM_S`) carries on where it stopped.
    """
    resumed = request.headers.get("last-event-id", "")
    # A file offset fits in 64 bits; a longer id is not one this stream sent.
    start = max(0, offset, int(resumed) if resumed.isdecimal() and len(resumed) < 19 else 0)

    async def events() -> AsyncIterator[str]:
        at = start
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + STREAM_S
        stopping = stopping_of(request.app)
        yield "retry: 1000\n\n"
        while (
            loop.time() < ends_at and not stopping.is_set() and not await request.is_disconnected()
        ):
            try:
                chunk, ended, status = await asyncio.to_thread(_read_from, request, run_id, at)
            except NotFound:
                yield sse_event("end", "gone")
                return
            # Whole lines only: a secret written in two pieces is recognisable once its line
            # is complete; the event id stays at the end of what was sent, for resuming.
            ready = whole_lines(chunk, final=ended) or (
                len(chunk) if len(chunk) == LOG_TAIL_BYTES else 0  # one line longer than that
            )
            if ready:
                at += ready
                yield sse_event("log", redact_bytes(chunk[:ready]).decode("utf-8"), at)
                continue
            if ended:
                yield sse_event("end", status)
                return
            # A stopping server ends the stream now; the page resumes it from the event id.
            await unless_set(stopping, asyncio.sleep(LOG_POLL_S))

    # A held request: it counts against the token's and the server's caps.
    return held_stream(
        request.app, current.token_id, events(), headers={"Cache-Control": "no-store"}
    )


@router.post("/web/procs/{run_id}/abort")
async def abort(request: Request, run_id: RunId, current: Session = Depends(session)) -> Response:
    """Abort a run after the ownership check (admins only); the answer says how it went."""
    form = await acting_form(request, current)
    back = local_path(form.get("back"), f"/web/procs/{run_id}")
    if not current.is_admin:
        return answer(request, back, f"only admins abort runs: @{current.name} is not", False)
    engine = services(request).procs
    try:
        result = await engine.abort_async(run_id)  # the grace period holds no thread
    except NotFound as exc:
        return answer(request, back, str(exc), False)
    log.info(
        "Dashboard abort of %s by @%s: %s",
        run_id,
        current.name,
        result.outcome.value,
        extra={"action": "web_abort"},
    )
    message = f"{result.outcome.value}: {result.detail}"
    return answer(request, back, message, True, outcome=result.outcome.value)
