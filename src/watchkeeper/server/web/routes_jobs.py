"""The jobs list (filters in the URL), a job's page (rounds, timeline, spend, record), a task's
page (its facts, its timeline, its output following live), control."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from watchkeeper.errors import Conflict, NotFound, WatchkeeperError
from watchkeeper.queue import rollup
from watchkeeper.queue.output import cut_note
from watchkeeper.queue.service import QueueService
from watchkeeper.queue.views import event_json, job_json, task_json
from watchkeeper.server.api.events import stopping_of
from watchkeeper.server.api.timeline import record_key
from watchkeeper.server.deps import services
from watchkeeper.server.http.longpoll import held_stream, sse_event, unless_set
from watchkeeper.server.web import charts, jobsview, tasks
from watchkeeper.server.web import task_output as outputs
from watchkeeper.server.web.common import acting_form, answer, local_path, page
from watchkeeper.server.web.routes_home import chrome, detail_page, page_session
from watchkeeper.server.web.session import Session, session
from watchkeeper.server.web.shared import shared_overview
from watchkeeper.server.web.stream import STREAM_S

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)
JOB_ID = re.compile(r"^[a-z]-[0-9a-f]{1,60}$")
JobId = Path(pattern=JOB_ID.pattern)
TASK_ID = re.compile(r"^[a-z]-[0-9a-f]{1,60}$")
TaskId = Path(pattern=TASK_ID.pattern)
#: How often a task page's stream looks for new output.
OUTPUT_POLL_S = 0.5


def _list_context(
    request: Request, view: jobsview.JobsView, on_screen: list[str] | None = None
) -> dict[str, Any]:
    queue = services(request).queue
    found = jobsview.find(queue, view)
    matched = {job.id for job in found.jobs}
    if on_screen:
        found = jobsview.keep_shown(queue, found, view, on_screen)
    blocked = queue.blocked(list(found.jobs)) if found.jobs else {}
    marks = queue.marks([task for job in found.jobs for task in job.tasks])
    shown = [job_json(job, blocked, marks) for job in found.jobs]
    _add_spend(request, shown)
    by_id = {body["id"]: body for body in shown}
    return {
        "view": view,
        "groups": [
            (day, [by_id[job.id] for job in jobs])
            for day, jobs in jobsview.by_day(found.jobs, view.group)
        ],
        "page_info": found,
        "unmatched": {job.id for job in found.jobs} - matched,
        "statuses": jobsview.STATUSES,
        "per_page": jobsview.PER_PAGE,
    }


def _add_spend(request: Request, bodies: list[dict[str, Any]]) -> None:
    """Each job's spend and how the page words it, all of them in one query."""
    try:
        spent = services(request).timeline.spend_of_jobs([body["id"] for body in bodies])
    except (ImportError, WatchkeeperError) as exc:  # the jobs are still worth showing
        log.warning("Spend of jobs not shown: %s", exc, extra={"action": "web_job_spend"})
        spent = {}
    for body in bodies:
        body["spend"] = spent.get(body["id"])
        body["spend_text"] = jobsview.spend_text(body["spend"]) if body["id"] in spent else ""


@router.get("/web/jobs", response_class=HTMLResponse)
async def jobs_page(request: Request, current: Session = Depends(page_session)) -> Response:
    """Jobs, filtered by status, fleet, org and text; the whole view is in the URL."""
    view = jobsview.JobsView.parse(request.query_params)
    asked = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if asked != view.query():  # a submitted filter form: the short, shareable form of the view
        return RedirectResponse(view.query(), 302)
    context = await asyncio.to_thread(_list_context, request, view)
    return page(request, "jobs.html", current, **context, **await chrome(request), title="Jobs")


@router.get("/web/fragments/jobs", response_class=HTMLResponse)
async def jobs_fragment(request: Request, current: Session = Depends(session)) -> HTMLResponse:
    """The jobs list alone (the same view parameters as the page), for live updates."""
    view = jobsview.JobsView.parse(request.query_params)
    shown = jobsview.shown_ids(request.query_params.get("shown"))
    context = await asyncio.to_thread(_list_context, request, view, shown)
    return page(request, "_jobs_list.html", current, **context)


def _job_body(queue: QueueService, job_id: str) -> dict[str, Any]:
    job = queue.job(job_id)
    return job_json(job, {}, {})


@router.get("/web/fragments/jobs/{job_id}/actions", response_class=HTMLResponse)
async def job_actions_fragment(
    request: Request, job_id: str = JobId, current: Session = Depends(session)
) -> Response:
    """A job's buttons alone, for what its state allows now: none once it is deleted."""
    try:
        body = await asyncio.to_thread(_job_body, services(request).queue, job_id)
    except NotFound:
        # Nothing is left to press, and a part without a source is not fetched again.
        return HTMLResponse('<div id="job-actions" class="actions"></div>')
    return page(request, "_job_actions.html", current, job=body)


def _timeline_context(request: Request, job_id: str, status: str) -> dict[str, Any]:
    found = services(request)
    events = [e.as_dict() for e in found.timeline.events(job_id=job_id)]
    links = found.timeline.links(job_id)
    signed = None
    if status not in ("queued", "running") and (events or links):
        signed = found.timeline.record(job_id, found.queue.job(job_id), record_key(request))
    return {
        "events": events,
        "rounds": charts.rounds(events),
        "picture": charts.timeline(events),
        "by_phase": charts.spend_rows(events, "phase"),
        "by_role": charts.spend_rows(events, "role"),
        "links": links,
        "merge": next((link for link in reversed(links) if link["kind"] == "merge"), None),
        "record": signed,
    }


def _job_context(request: Request, job_id: str) -> dict[str, Any]:
    queue = services(request).queue
    job = queue.job(job_id)
    body = job_json(job, queue.blocked([job]), queue.marks(job.tasks))
    _add_spend(request, [body])
    status = rollup.of_job(job).value
    for task in body["tasks"]:
        task["output"] = tasks.shown_output(queue, task["id"])
    context: dict[str, Any] = {"job": body, "task_events": queue.job_events(job_id)}
    try:
        context["timeline"] = _timeline_context(request, job_id, status)
    except (ImportError, WatchkeeperError) as exc:
        log.warning(
            "Timeline of job %s not shown: %s", job_id, exc, extra={"action": "web_job_timeline"}
        )
        context["timeline"] = None
        context["timeline_error"] = str(exc)
    return context


@router.get("/web/jobs/{job_id}", response_class=HTMLResponse)
async def job_page(
    request: Request, job_id: str, current: Session = Depends(page_session)
) -> HTMLResponse:
    """One job: its tasks, rounds and timeline, spend per phase and role, its record.

    Any id is taken here (not only well-formed ones): one that names no job gets the
    dashboard's not-found page, not the API's validation error.
    """

    def read() -> dict[str, Any]:
        if not JOB_ID.match(job_id):
            raise NotFound(f"no job {job_id!r}: see the jobs list")
        return _job_context(request, job_id)

    return await detail_page(request, current, "job.html", f"Job {job_id}", read)


def _task_context(request: Request, task_id: str) -> dict[str, Any]:
    if not TASK_ID.match(task_id):
        raise NotFound(f"no task {task_id!r}: see the jobs list")
    queue = services(request).queue
    task = queue.task(task_id)
    job = queue.job(task.job_id)
    body = task_json(task, queue.blocked([job]), queue.marks([task]))
    history = [event_json(e) for e in queue.job_events(job.id) if e.task_id == task_id]
    context: dict[str, Any] = {
        "task": body,
        "job": {"id": job.id, "title": job.title, "tasks": len(job.tasks)},
        "history": history,
        "output": outputs.first_view(queue, task_id),
    }
    try:
        events = [e.as_dict() for e in services(request).timeline.events(task_id=task_id)]
        context["events"] = events
    except (ImportError, WatchkeeperError) as exc:
        log.warning(
            "Timeline of task %s not shown: %s", task_id, exc, extra={"action": "web_task_timeline"}
        )
        context["events"] = None
        context["timeline_error"] = str(exc)
    return context


@router.get("/web/tasks/{task_id}", response_class=HTMLResponse)
async def task_page(
    request: Request, task_id: str, current: Session = Depends(page_session)
) -> HTMLResponse:
    """One task: its facts, its timeline, and its output, following live while it runs.

    Any id is taken here: one that names no task gets the dashboard's not-found page.
    """
    read = functools.partial(_task_context, request, task_id)
    return await detail_page(request, current, "task.html", f"Task {task_id}", read)


@router.get("/web/tasks/{task_id}/follow")
async def follow_output(
    request: Request,
    task_id: str = TaskId,
    at: int = Query(0, ge=0, le=2**62),
    run: str = Query("", max_length=100),
    current: Session = Depends(session),
) -> Response:
    """Server-sent events: what the task's output gains (``output``; ``reset`` when another
    run took the task up and its output replaces the last one's), then ``end`` with the
    task's status once it ended (``gone`` once it was deleted).

    Each event's id is where the page got to, so a reconnecting browser (a stream lasts at
    most :data:`STREAM_S`) carries on where it stopped.
    """
    resumed = outputs.Mark.parse(request.headers.get("last-event-id", ""))
    start = resumed or outputs.Mark(at, run)
    queue = services(request).queue

    async def events() -> AsyncIterator[str]:
        mark = start
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + STREAM_S
        stopping = stopping_of(request.app)
        yield "retry: 1000\n\n"
        while (
            loop.time() < ends_at and not stopping.is_set() and not await request.is_disconnected()
        ):
            try:
                found = await asyncio.to_thread(outputs.gained, queue, task_id, mark)
            except NotFound:
                yield sse_event("end", "gone")
                return
            if found.restarted or found.text:
                mark = found.mark
                name = "reset" if found.restarted else "output"
                yield sse_event(name, found.text, mark.ident())
            if found.ended is not None:
                yield sse_event("end", found.ended)
                return
            if not found.text:
                # A stopping server ends the stream now; the page resumes it from the event id.
                await unless_set(stopping, asyncio.sleep(OUTPUT_POLL_S))

    # A held request: it counts against the token's and the server's caps.
    return held_stream(
        request.app, current.token_id, events(), headers={"Cache-Control": "no-store"}
    )


@router.get("/web/tasks/{task_id}/output", response_class=PlainTextResponse)
async def task_output(
    request: Request, task_id: str = TaskId, current: Session = Depends(session)
) -> Response:
    """All the output the task's last run shipped, redacted, as plain text; a note at the
    end when it was cut at the cap."""
    queue = services(request).queue
    try:
        shipped = await asyncio.to_thread(queue.outputs.shipped, task_id)
    except NotFound as exc:
        return PlainTextResponse(f"{exc}\n", status_code=404)
    if shipped is None:
        text = f"no output of task {task_id} yet: its runner ships it while the task runs\n"
    else:
        note = cut_note(shipped)
        text = shipped.text + (f"\n[{note}]\n" if note else "")
    # Output is the task's, not ours: never let a browser take it for a page.
    headers = {"X-Content-Type-Options": "nosniff"}
    return PlainTextResponse(text, headers=headers)


_DONE = {"cancel": "cancelled", "retry": "queued again", "delete": "deleted"}


@router.post("/web/jobs/{job_id}/{action}")
async def control(
    request: Request,
    action: Literal["cancel", "retry", "delete"],
    job_id: str = JobId,
    current: Session = Depends(session),
) -> Response:
    """Cancel, retry or delete a job (admins only); the answer says how many tasks moved."""
    form = await acting_form(request, current)
    back = local_path(form.get("back"), f"/web/jobs/{job_id}")
    if not current.is_admin:
        return answer(request, back, f"only admins {action} jobs: @{current.name} is not", False)
    queue = services(request).queue
    act = {"cancel": queue.cancel, "retry": queue.retry, "delete": queue.delete}[action]
    try:
        done = await asyncio.to_thread(act, job_id)
    except (NotFound, Conflict) as exc:
        return answer(request, back, str(exc), False)
    shared_overview(request).forget()
    noun = "task" if done.affected == 1 else "tasks"
    message = f"{done.affected} {noun} {_DONE[action]}"
    if action == "delete":
        message = f"job {job_id} deleted with its {done.affected} {noun}"
        back = local_path(form.get("back_after_delete"), "/web/jobs")
    log.info(
        "Dashboard %s of job %s by @%s: %d task(s)",
        action,
        job_id,
        current.name,
        done.affected,
        extra={"action": "web_job_control"},
    )
    return answer(request, back, message, True, affected=done.affected)
