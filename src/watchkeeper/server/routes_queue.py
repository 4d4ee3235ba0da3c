"""``/api/v1/jobs``, ``/api/v1/tasks``, ``/api/v1/runners`` and ``/api/v1/topology``.

Submitting, cancelling, retrying and deleting jobs runs or stops commands on
runner hosts: admin only. Runners hold reporter tokens: they register,
heartbeat, lease and report. Reading is for viewers. A task's own token is
refused on every route here (403): it may only send timeline events about
its task. A move on a lease that is gone answers 409 with the code
``lease_lost``: the runner must stop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from watchkeeper.clock import rfc3339
from watchkeeper.queue import rollup
from watchkeeper.queue.rules import Blocked
from watchkeeper.queue.service import QueueService
from watchkeeper.queue.topology import runner_json, topology
from watchkeeper.records.queue import Job, JobStatus, NewRunner, Task, TaskStatus
from watchkeeper.runtime import Runtime
from watchkeeper.server.auth import admin, reporter, viewer
from watchkeeper.server.fields import ExitCode, JsonObject, Line, Pid, Text
from watchkeeper.server.routes_events import publish_task_updated
from watchkeeper.server.routes_runs import ERRORS
from watchkeeper.server.schemas import REASON_MAX, STEP_MAX, TITLE_MAX
from watchkeeper.store.tokens import TokenInfo

router = APIRouter(tags=["queue"], responses=ERRORS)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
QueueName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Id = Annotated[str, StringConstraints(pattern=r"^[a-z]-[0-9a-f]{1,60}$")]
LeaseToken = Annotated[str, Line(64, min_length=1)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubmitJob(_Body):
    """``POST /api/v1/jobs``: queue a job; ``payload.argv`` is the command a runner runs."""

    title: Annotated[str, Text(TITLE_MAX, min_length=1)]
    org: QueueName
    fleet: QueueName
    payload: JsonObject
    rerunnable: bool = Field(default=True, description="false: effects unknown, never re-run")
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    lease_s: float | None = Field(default=None, ge=1, le=86400)


class ResumeJob(_Body):
    """``POST /api/v1/jobs/{id}/resume`` or ``/api/v1/tasks/{id}/resume``: add a
    continuation task (default: the job's payload, or the task's)."""

    payload: JsonObject | None = None


class RegisterRunner(_Body):
    """``POST /api/v1/runners``: a runner starts serving ``fleet``."""

    fleet: QueueName
    capacity: int = Field(default=1, ge=1, le=1000)
    host: Annotated[str, Line(255, min_length=1)]
    pid: Pid
    org: QueueName | None = None
    name: Annotated[str, Line(200)] | None = None


class LeaseIn(_Body):
    """``POST /api/v1/runners/{id}/lease``: how many tasks the runner can take now."""

    max: int = Field(default=1, ge=1, le=100)


class RenewIn(_Body):
    """``POST /api/v1/tasks/{id}/renew``: the lease holder is alive (and maybe moved)."""

    lease_token: LeaseToken
    progressed: bool = False
    step: Annotated[str, Text(STEP_MAX)] | None = None


class CompleteIn(_Body):
    """``POST /api/v1/tasks/{id}/complete``."""

    lease_token: LeaseToken
    exit_code: ExitCode | None = 0


class FailIn(_Body):
    """``POST /api/v1/tasks/{id}/fail``."""

    lease_token: LeaseToken
    reason: Annotated[str, Text(REASON_MAX, min_length=1)]
    fingerprint: Annotated[str, Line(200)] | None = None
    exit_code: ExitCode | None = None


def queue_of(request: Request) -> QueueService:
    """The app's queue service, built on first use from its runtime."""
    found = getattr(request.app.state, "queue_service", None)
    if isinstance(found, QueueService):
        return found
    runtime: Runtime = request.app.state.runtime
    built = QueueService(runtime.store, runtime.settings, clock=runtime.clock)
    request.app.state.queue_service = built
    return built


def task_json(
    task: Task, blocked: dict[str, Blocked], marks: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A task as the API shows it, with its blocked reason while queued.

    Given ``marks`` (``interrupted_at`` per marked task id), the form says
    ``interrupted`` and ``interrupted_at``; without them it leaves both out, and
    a client merging it keeps the marker it had.
    """
    body = task.as_dict()
    if task.status is TaskStatus.QUEUED:
        reason = blocked.get(task.id)
        body["blocked"] = None if reason is None else reason.as_dict()
    if marks is not None:
        body["interrupted"] = task.id in marks
        body["interrupted_at"] = marks.get(task.id)
    return body


def marks_of(queue: QueueService, tasks: list[Task]) -> dict[str, str]:
    """The interrupted markers of ``tasks``."""
    return queue.store.interrupted([task.id for task in tasks])


def _cleared(request: Request, queue: QueueService, tasks: list[Task]) -> None:
    """A task runs again: remove its interrupted marker, and say so when one went."""
    removed = set(queue.store.clear_interrupted([task.id for task in tasks], queue.clock()))
    for task in tasks:
        if task.id in removed:
            publish_task_updated(request.app, task_json(task, {}, {}))


def job_json(
    job: Job, blocked: dict[str, Blocked], marks: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A job with its rolled-up status and its tasks."""
    return {
        "id": job.id,
        "title": job.title,
        "org": job.org,
        "fleet": job.fleet,
        "payload": job.payload,
        "submitted_by": job.submitted_by,
        "created_at": rfc3339(job.created_at),
        "status": rollup.of_tasks(job.tasks).value,
        "tasks": [task_json(task, blocked, marks) for task in job.tasks],
    }


# Jobs ----------------------------------------------------------------------------------


@router.post("/api/v1/jobs", status_code=201)
def submit(body: SubmitJob, request: Request, token: TokenInfo = Depends(admin)) -> dict[str, Any]:
    """Queue a job; its first task waits for a runner of its fleet."""
    queue = queue_of(request)
    job = queue.submit(
        body.title,
        org=body.org,
        fleet=body.fleet,
        payload=body.payload,
        submitted_by=token.name,
        rerunnable=body.rerunnable,
        max_attempts=body.max_attempts,
        lease_s=body.lease_s,
    )
    return job_json(job, queue.blocked([job]), {})


@router.get("/api/v1/jobs", dependencies=[Depends(viewer)])
def list_jobs(
    request: Request,
    status: JobStatus | None = Query(None, description="the jobs' rolled-up status"),
    fleet: QueueName | None = Query(None),
    org: QueueName | None = Query(None),
    limit: int = Query(200, ge=1, le=5000),
) -> dict[str, Any]:
    """Jobs newest first, each queued task with why it waits."""
    queue = queue_of(request)
    jobs = queue.jobs(status=status, fleet=fleet, org=org, limit=limit)
    blocked = queue.blocked(jobs) if jobs else {}
    marks = marks_of(queue, [task for job in jobs for task in job.tasks])
    return {"jobs": [job_json(job, blocked, marks) for job in jobs]}


@router.get("/api/v1/jobs/{job_id}", dependencies=[Depends(viewer)])
def get_job(job_id: Id, request: Request) -> dict[str, Any]:
    """One job with its tasks, why any waits, and its timeline."""
    queue = queue_of(request)
    job = queue.job(job_id)
    body = job_json(job, queue.blocked([job]), marks_of(queue, list(job.tasks)))
    body["timeline"] = [
        {"task_id": e.task_id, "at": rfc3339(e.at), "type": e.type, "detail": e.detail}
        for e in queue.store.events(job_id)
    ]
    return body


@router.post("/api/v1/jobs/{job_id}/cancel", dependencies=[Depends(admin)])
def cancel(job_id: Id, request: Request) -> dict[str, Any]:
    """Cancel the job's unfinished tasks; running ones lose their lease and are aborted."""
    return queue_of(request).cancel(job_id).as_dict()


@router.post("/api/v1/jobs/{job_id}/retry", dependencies=[Depends(admin)])
def retry(job_id: Id, request: Request) -> dict[str, Any]:
    """Queue the job's failed, cancelled and stuck tasks again."""
    return queue_of(request).retry(job_id).as_dict()


@router.post("/api/v1/jobs/{job_id}/resume", status_code=201, dependencies=[Depends(admin)])
def resume(job_id: Id, request: Request, body: ResumeJob | None = Body(None)) -> dict[str, Any]:
    """Add a continuation task to a job whose tasks have all ended."""
    queue = queue_of(request)
    task = queue.resume(job_id, (body or ResumeJob()).payload)
    return task_json(task, queue.explain(queue.store.queued(task_ids=[task.id])), {})


@router.delete("/api/v1/jobs/{job_id}", dependencies=[Depends(admin)])
def delete(job_id: Id, request: Request) -> dict[str, Any]:
    """Delete a job and its tasks (refused while one runs: cancel first)."""
    return queue_of(request).delete(job_id).as_dict()


# Tasks ---------------------------------------------------------------------------------


@router.get("/api/v1/tasks/{task_id}", dependencies=[Depends(viewer)])
def get_task(task_id: Id, request: Request) -> dict[str, Any]:
    """One task, with why it waits while queued."""
    queue = queue_of(request)
    task = queue.store.task(task_id)
    blocked = {}
    if task.status is TaskStatus.QUEUED:
        blocked = queue.explain(queue.store.queued(task_ids=[task_id]))
    return task_json(task, blocked, marks_of(queue, [task]))


@router.post("/api/v1/tasks/{task_id}/resume", status_code=201, dependencies=[Depends(admin)])
def resume_task(
    task_id: Id, request: Request, body: ResumeJob | None = Body(None)
) -> dict[str, Any]:
    """Add a continuation task to the task's job (default: the task's payload)."""
    queue = queue_of(request)
    original = queue.store.task(task_id)
    payload = (body or ResumeJob()).payload
    task = queue.resume(original.job_id, original.payload if payload is None else payload)
    return task_json(task, queue.explain(queue.store.queued(task_ids=[task.id])), {})


@router.post("/api/v1/tasks/{task_id}/renew", dependencies=[Depends(reporter)], response_model=None)
def renew(task_id: Id, body: RenewIn, request: Request) -> dict[str, Any]:
    """Renew the lease; ``lease_lost`` (409) means stop and abort the run."""
    queue = queue_of(request)
    task = queue.renew(task_id, body.lease_token, progressed=body.progressed, step=body.step)
    _cleared(request, queue, [task])
    return {"id": task.id, "lease_expires_at": rfc3339(task.lease_expires_at)}


@router.post(
    "/api/v1/tasks/{task_id}/complete", dependencies=[Depends(reporter)], response_model=None
)
def complete(task_id: Id, body: CompleteIn, request: Request) -> dict[str, Any]:
    """Record success under a live lease."""
    return queue_of(request).complete(task_id, body.lease_token, body.exit_code).as_dict()


@router.post("/api/v1/tasks/{task_id}/fail", dependencies=[Depends(reporter)], response_model=None)
def fail(task_id: Id, body: FailIn, request: Request) -> dict[str, Any]:
    """Record failure under a live lease."""
    task = queue_of(request).fail(
        task_id,
        body.lease_token,
        body.reason,
        fingerprint=body.fingerprint,
        exit_code=body.exit_code,
    )
    return task.as_dict()


# Runners -------------------------------------------------------------------------------


@router.post("/api/v1/runners", status_code=201, dependencies=[Depends(reporter)])
def register(body: RegisterRunner, request: Request) -> dict[str, Any]:
    """Register a runner; it is alive from this first heartbeat."""
    queue = queue_of(request)
    runner = queue.register(
        NewRunner(body.fleet, body.capacity, body.host, body.pid, body.org, body.name)
    )
    return runner_json(runner, queue.alive(runner))


@router.get("/api/v1/runners", dependencies=[Depends(viewer)])
def list_runners(request: Request) -> dict[str, Any]:
    """Registered runners, alive or not."""
    queue = queue_of(request)
    return {"runners": [runner_json(r, queue.alive(r)) for r in queue.runners()]}


@router.post("/api/v1/runners/{runner_id}/heartbeat", dependencies=[Depends(reporter)])
def heartbeat(runner_id: Id, request: Request) -> dict[str, Any]:
    """The runner is alive (leasing does not count: a busy runner heartbeats)."""
    queue = queue_of(request)
    runner = queue.heartbeat(runner_id)
    return runner_json(runner, queue.alive(runner))


@router.post("/api/v1/runners/{runner_id}/lease", dependencies=[Depends(reporter)])
def lease(runner_id: Id, request: Request, body: LeaseIn | None = Body(None)) -> dict[str, Any]:
    """Lease up to ``max`` tasks the lease rules allow this runner; each with its lease
    token, and ``task_token``: the API token for the task's own process, which may
    only report about that task and ends with the lease."""
    queue = queue_of(request)
    leases = queue.lease(runner_id, (body or LeaseIn()).max)
    if leases:
        _cleared(request, queue, [x.task for x in leases])
    return {
        "tasks": [
            {**x.task.as_dict(), "lease_token": x.token, "task_token": x.task_token} for x in leases
        ]
    }


@router.post("/api/v1/runners/{runner_id}/stop", dependencies=[Depends(reporter)])
def stop(runner_id: Id, request: Request) -> dict[str, Any]:
    """The runner leaves; its leases are taken back at once."""
    recovered = queue_of(request).stop_runner(runner_id)
    return {
        "id": runner_id,
        "requeued": list(recovered.requeued),
        "stuck": list(recovered.stuck),
        "failed": list(recovered.failed),
    }


@router.get("/api/v1/topology", dependencies=[Depends(viewer)])
def get_topology(request: Request) -> dict[str, Any]:
    """Fleets, runners (alive or not) and the tasks each runs now."""
    queue = queue_of(request)
    store = queue.store
    return topology(
        store.runners(), store.running_tasks(), store.queued(), queue.policy, queue.clock()
    )
