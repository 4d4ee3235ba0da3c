"""``/api/v1/jobs``, ``/api/v1/tasks``, ``/api/v1/runners`` and ``/api/v1/topology``.

Submitting, cancelling, retrying and deleting jobs runs or stops commands on
runner hosts: admin only. Runners hold reporter tokens: they register,
heartbeat, lease and report. Reading is for viewers. A task's own token is
refused on every route here (403): it may only send timeline events about
its task. A move on a lease that is gone answers 409 with the code
``lease_lost``: the runner must stop.

A runner ships all of a task's output, redacted, while the task runs
(``POST /api/v1/tasks/{id}/output/chunks``, under the lease, each piece with
the log offset it starts at), and the redacted tail when the task ends
(``POST /api/v1/tasks/{id}/output``); viewers read the tail back with ``GET``,
and all that was shipped with ``GET ...?all=true``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from fastapi import APIRouter, Body, Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse

from watchkeeper.access.tokens import TokenInfo
from watchkeeper.clock import rfc3339
from watchkeeper.errors import InvalidInput
from watchkeeper.queue.errors import LeaseLost
from watchkeeper.queue.output import (
    CHUNK_TEXT_MAX,
    OUTPUT_CAP_BYTES,
    Piece,
    clean,
    cut_note,
)
from watchkeeper.queue.service import End, QueueService
from watchkeeper.queue.topology import runner_json
from watchkeeper.queue.views import TaskUpdated, event_json, job_json, task_json
from watchkeeper.records.queue import JobStatus, Lease, NewRunner, Task, TaskStatus
from watchkeeper.server.api.events import publish_task_updated
from watchkeeper.server.api.queue_bodies import (
    ChunkIn,
    CompleteIn,
    FailIn,
    Id,
    LeaseIn,
    OutcomeIn,
    OutcomesIn,
    OutputIn,
    QueueName,
    RegisterRunner,
    RenewIn,
    ResumeJob,
    SubmitJob,
)
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import services
from watchkeeper.server.http.auth import admin, reporter, viewer

router = APIRouter(tags=["queue"], responses=ERRORS)


def announcer(app: FastAPI) -> TaskUpdated:
    """The ``on_update`` of ``app``'s queue calls: each task's new form is published as
    ``task.updated`` on the app's event stream."""
    return partial(publish_task_updated, app)


# Jobs ----------------------------------------------------------------------------------


@router.post("/api/v1/jobs", status_code=201)
def submit(body: SubmitJob, request: Request, token: TokenInfo = Depends(admin)) -> dict[str, Any]:
    """Queue a job; its first task waits for a runner of its fleet."""
    queue = services(request).queue
    job = queue.submit(**body.model_dump(), submitted_by=token.name)
    return _with_spend(request, [job_json(job, queue.blocked([job]), {})])[0]


def _with_spend(request: Request, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each job's ``spend``: its calls' cost and tokens, all the list's jobs in one query."""
    spent = services(request).timeline.spend_of_jobs([body["id"] for body in bodies])
    for body in bodies:
        body["spend"] = spent[body["id"]]
    return bodies


@router.get("/api/v1/jobs", dependencies=[Depends(viewer)])
def list_jobs(
    request: Request,
    status: JobStatus | None = Query(None, description="the jobs' rolled-up status"),
    fleet: QueueName | None = Query(None),
    org: QueueName | None = Query(None),
    limit: int = Query(200, ge=1, le=5000),
) -> dict[str, Any]:
    """Jobs newest first, each queued task with why it waits."""
    queue = services(request).queue
    jobs = queue.jobs(status=status, fleet=fleet, org=org, limit=limit)
    blocked = queue.blocked(jobs) if jobs else {}
    marks = queue.marks([task for job in jobs for task in job.tasks])
    return {"jobs": _with_spend(request, [job_json(job, blocked, marks) for job in jobs])}


@router.get("/api/v1/jobs/{job_id}", dependencies=[Depends(viewer)])
def get_job(job_id: Id, request: Request) -> dict[str, Any]:
    """One job with its tasks, why any waits, and its timeline."""
    queue = services(request).queue
    job = queue.job(job_id)
    body = _with_spend(request, [job_json(job, queue.blocked([job]), queue.marks(job.tasks))])[0]
    body["timeline"] = [event_json(event) for event in queue.job_events(job_id)]
    return body


@router.post("/api/v1/jobs/{job_id}/cancel", dependencies=[Depends(admin)])
def cancel(job_id: Id, request: Request) -> dict[str, Any]:
    """Cancel the job's unfinished tasks; running ones lose their lease and are aborted."""
    return services(request).queue.cancel(job_id).as_dict()


@router.post("/api/v1/jobs/{job_id}/retry", dependencies=[Depends(admin)])
def retry(job_id: Id, request: Request) -> dict[str, Any]:
    """Queue the job's failed, cancelled and stuck tasks again."""
    return services(request).queue.retry(job_id).as_dict()


@router.post("/api/v1/jobs/{job_id}/resume", status_code=201, dependencies=[Depends(admin)])
def resume(job_id: Id, request: Request, body: ResumeJob | None = Body(None)) -> dict[str, Any]:
    """Add a continuation task to a job whose tasks have all ended."""
    return _resumed(request, job_id, (body or ResumeJob()).payload)


@router.delete("/api/v1/jobs/{job_id}", dependencies=[Depends(admin)])
def delete(job_id: Id, request: Request) -> dict[str, Any]:
    """Delete a job and its tasks (refused while one runs: cancel first)."""
    return services(request).queue.delete(job_id).as_dict()


# Tasks ---------------------------------------------------------------------------------


@router.get("/api/v1/tasks/{task_id}", dependencies=[Depends(viewer)])
def get_task(task_id: Id, request: Request) -> dict[str, Any]:
    """One task, with why it waits while queued."""
    queue = services(request).queue
    task = queue.task(task_id)
    blocked = queue.waiting([task_id]) if task.status is TaskStatus.QUEUED else {}
    return task_json(task, blocked, queue.marks([task]))


@router.post("/api/v1/tasks/{task_id}/resume", status_code=201, dependencies=[Depends(admin)])
def resume_task(
    task_id: Id, request: Request, body: ResumeJob | None = Body(None)
) -> dict[str, Any]:
    """Add a continuation task to the task's job (default: the task's payload)."""
    original = services(request).queue.task(task_id)
    payload = (body or ResumeJob()).payload
    return _resumed(request, original.job_id, original.payload if payload is None else payload)


def _resumed(request: Request, job_id: str, payload: dict[str, Any] | None) -> dict[str, Any]:
    """Resume ``job_id``; the new task's form, with why it waits."""
    queue = services(request).queue
    task = queue.resume(job_id, payload)
    return task_json(task, queue.waiting([task.id]), {})


@router.post("/api/v1/tasks/{task_id}/renew", dependencies=[Depends(reporter)], response_model=None)
def renew(task_id: Id, body: RenewIn, request: Request) -> dict[str, Any]:
    """Renew the lease; ``lease_lost`` (409) means stop and abort the run."""
    task = services(request).queue.renew(
        task_id,
        body.lease_token,
        progressed=body.progressed,
        step=body.step,
        on_update=announcer(request.app),
    )
    return {"id": task.id, "lease_expires_at": rfc3339(task.lease_expires_at)}


@router.post(
    "/api/v1/tasks/{task_id}/complete", dependencies=[Depends(reporter)], response_model=None
)
def complete(task_id: Id, body: CompleteIn, request: Request) -> dict[str, Any]:
    """Record success under a live lease (committed with other outcomes sent meanwhile)."""
    end = End(task_id, body.lease_token, TaskStatus.SUCCEEDED, body.exit_code)
    return _ended(services(request).queue.end_many([end])[0]).as_dict()


@router.post("/api/v1/tasks/{task_id}/fail", dependencies=[Depends(reporter)], response_model=None)
def fail(task_id: Id, body: FailIn, request: Request) -> dict[str, Any]:
    """Record failure under a live lease (committed with other outcomes sent meanwhile)."""
    end = End(
        task_id, body.lease_token, TaskStatus.FAILED, body.exit_code, body.reason, body.fingerprint
    )
    return _ended(services(request).queue.end_many([end])[0]).as_dict()


def _ended(result: Task | LeaseLost) -> Task:
    if isinstance(result, LeaseLost):
        raise result
    return result


@router.post("/api/v1/tasks/outcomes", dependencies=[Depends(reporter)], response_model=None)
def outcomes(body: OutcomesIn, request: Request) -> dict[str, Any]:
    """Record several tasks' outcomes, each under its own lease, in one transaction.

    Answered after the commit, one entry per outcome in order: the task, or
    ``{"id", "code": "lease_lost"}`` for one whose lease is gone (only that
    outcome is refused; the others are recorded).
    """
    ends = [_end(item) for item in body.outcomes]
    return {"outcomes": _outcomes(ends, services(request).queue.end_many(ends))}


def _end(item: OutcomeIn) -> End:
    status = TaskStatus.FAILED if item.reason is not None else TaskStatus.SUCCEEDED
    return End(
        item.task_id, item.lease_token, status, item.exit_code, item.reason, item.fingerprint
    )


def _outcomes(ends: list[End], found: list[Task | LeaseLost]) -> list[dict[str, Any]]:
    """One answer per outcome, in order: the task, or why its outcome was refused."""
    return [
        {"id": end.task_id, "code": "lease_lost", "message": str(result)}
        if isinstance(result, LeaseLost)
        else result.as_dict()
        for end, result in zip(ends, found, strict=True)
    ]


@router.post(
    "/api/v1/tasks/{task_id}/output", dependencies=[Depends(reporter)], response_model=None
)
def put_output(task_id: Id, body: OutputIn, request: Request) -> dict[str, Any]:
    """Keep the tail of the task's output (redacted again here); send it before the outcome,
    while the lease is live. ``lease_lost`` (409): the task is no longer this runner's."""
    queue = services(request).queue
    if not queue.outputs.keep(task_id, body.lease_token, clean(body.output)):
        raise LeaseLost(task_id)
    return {"id": task_id}


@router.post(
    "/api/v1/tasks/{task_id}/output/chunks", dependencies=[Depends(reporter)], response_model=None
)
def put_output_chunk(task_id: Id, body: ChunkIn, request: Request) -> dict[str, Any]:
    """Add a piece of the task's output (redacted again here), while the lease is live.

    A piece is kept only if it starts where the last one ended (``offset``): one
    sent again is kept once; the answer's ``next_offset`` says where the next
    starts. Past the cap of a run's output nothing more is kept (``cut``). A new
    lease starts the task's output afresh. ``lease_lost`` (409): not this runner's.
    """
    if body.end < body.offset:
        raise InvalidInput(f"end ({body.end}) is before offset ({body.offset}): send end >= offset")
    queue = services(request).queue
    piece = Piece(
        body.offset,
        body.end,
        clean(body.output, 2 * CHUNK_TEXT_MAX),
        body.final,
        body.run_id,
        body.host,
    )
    shipped = queue.outputs.ship(task_id, body.lease_token, piece)
    if shipped is None:
        raise LeaseLost(task_id)
    return {
        "id": task_id,
        "next_offset": shipped.next_offset,
        "kept": shipped.kept,
        "cut": shipped.cut,
        "complete": shipped.complete,
    }


@router.get("/api/v1/tasks/{task_id}/output", dependencies=[Depends(viewer)])
def get_output(
    task_id: Id,
    request: Request,
    all: bool = Query(False, description="all the output its last run shipped, not the tail"),
) -> dict[str, Any]:
    """The redacted tail of what the task printed in its last run that ended (``output`` is
    ``null`` until a runner sent one), and when it arrived.

    With ``all=true``: all that the task's last run shipped (``null`` until it shipped
    some), whether that run still holds the task (``running``), whether its runner sent
    it all (``complete``), and whether it was cut at the cap (``cut``, with a ``note``
    saying where the whole of it is).
    """
    if all:
        return _all_output(task_id, request)
    kept = services(request).queue.outputs.kept(task_id)
    return {
        "id": task_id,
        "output": None if kept is None else kept.tail,
        "recorded_at": None if kept is None else rfc3339(kept.recorded_at),
    }


def _all_output(task_id: str, request: Request) -> dict[str, Any]:
    shipped = services(request).queue.outputs.shipped(task_id)
    if shipped is None:
        return {
            "id": task_id,
            "all": True,
            "output": None,
            "running": False,
            "complete": False,
            "cut": False,
            "note": None,
            "run_id": None,
            "host": None,
            "bytes": 0,
            "cap_bytes": OUTPUT_CAP_BYTES,
            "updated_at": None,
        }
    return {
        "id": task_id,
        "all": True,
        "output": shipped.text,
        "running": shipped.running,
        "complete": shipped.complete,
        "cut": shipped.cut,
        "note": cut_note(shipped),
        "run_id": shipped.run_id,
        "host": shipped.host,
        "bytes": shipped.kept_bytes,
        "cap_bytes": OUTPUT_CAP_BYTES,
        "updated_at": rfc3339(shipped.updated_at),
    }


# Runners -------------------------------------------------------------------------------


@router.post("/api/v1/runners", status_code=201, dependencies=[Depends(reporter)])
def register(body: RegisterRunner, request: Request) -> dict[str, Any]:
    """Register a runner; it is alive from this first heartbeat."""
    queue = services(request).queue
    runner = queue.register(
        NewRunner(body.fleet, body.capacity, body.host, body.pid, body.org, body.name)
    )
    return runner_json(runner, queue.alive(runner))


@router.get("/api/v1/runners", dependencies=[Depends(viewer)])
def list_runners(request: Request) -> dict[str, Any]:
    """Registered runners, alive or not."""
    queue = services(request).queue
    return {"runners": [runner_json(r, queue.alive(r)) for r in queue.runners()]}


@router.post("/api/v1/runners/{runner_id}/heartbeat", dependencies=[Depends(reporter)])
def heartbeat(runner_id: Id, request: Request) -> dict[str, Any]:
    """The runner is alive (a lease counts too; a busy runner that leases nothing beats)."""
    queue = services(request).queue
    runner = queue.heartbeat(runner_id)
    return runner_json(runner, queue.alive(runner))


@router.post(
    "/api/v1/runners/{runner_id}/lease", dependencies=[Depends(reporter)], response_model=None
)
def lease(runner_id: Id, request: Request, body: LeaseIn | None = Body(None)) -> JSONResponse:
    """Lease up to ``max`` tasks the lease rules allow this runner; each with its lease
    token, and ``task_token``: the API token for the task's own process, which may
    only report about that task and ends with the lease. ``reason`` says why no task
    was leased (``code``, ``message``), or that a runner counted offline is back. A
    lease counts as the runner's heartbeat."""
    # The answer holds only JSON values already: sent as it is, it spares the generic
    # encoder's walk over every field of every task (about 0.1 ms of CPU per task).
    return JSONResponse(
        leased_answer(services(request).queue, runner_id, body or LeaseIn(), announcer(request.app))
    )


def leased_answer(
    queue: QueueService, runner_id: str, body: LeaseIn, on_update: TaskUpdated
) -> dict[str, Any]:
    """What ``POST /api/v1/runners/{id}/lease`` answers: the outcomes sent recorded, then
    the tasks leased (:meth:`QueueService.lease_pass`), and ``reason``: why none was
    leased (or that a runner counted offline is back), else ``null``."""
    ends = [_end(item) for item in body.outcomes or ()]
    done = queue.lease_pass(runner_id, ends, body.max, on_update=on_update)
    answer: dict[str, Any] = {"tasks": _leased(done.leases)}
    if body.outcomes is not None:
        answer["outcomes"] = _outcomes(ends, done.outcomes)
    answer["reason"] = None if done.reason is None else done.reason.as_dict()
    return answer


def _leased(leases: list[Lease]) -> list[dict[str, Any]]:
    return [
        {**x.task.as_dict(), "lease_token": x.token, "task_token": x.task_token} for x in leases
    ]


@router.post("/api/v1/runners/{runner_id}/stop", dependencies=[Depends(reporter)])
def stop(runner_id: Id, request: Request) -> dict[str, Any]:
    """The runner leaves; its leases are taken back at once."""
    recovered = services(request).queue.stop_runner(runner_id)
    return {
        "id": runner_id,
        "requeued": list(recovered.requeued),
        "stuck": list(recovered.stuck),
        "failed": list(recovered.failed),
    }


@router.get("/api/v1/topology", dependencies=[Depends(viewer)])
def get_topology(request: Request) -> dict[str, Any]:
    """Fleets, runners (alive or not) and the tasks each runs now."""
    return services(request).queue.topology()
