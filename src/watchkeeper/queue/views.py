"""Jobs and tasks as the API, the event stream and the dashboard show them.

One form serves every reader, so a ``task.updated`` event carries exactly the
keys ``GET /api/v1/tasks/{id}`` answers with, and a client can merge it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from watchkeeper.clock import rfc3339
from watchkeeper.queue import rollup
from watchkeeper.queue.rules import Blocked
from watchkeeper.records.queue import Event, Job, Task, TaskStatus

#: Receives the API form of a task whose form changed (the server publishes ``task.updated``).
TaskUpdated = Callable[[dict[str, Any]], None]


def task_json(
    task: Task, blocked: Mapping[str, Blocked], marks: Mapping[str, str] | None = None
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


def job_json(
    job: Job, blocked: Mapping[str, Blocked], marks: Mapping[str, str] | None = None
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
        "origin": job.origin,
        "status": rollup.of_tasks(job.tasks).value,
        "tasks": [task_json(task, blocked, marks) for task in job.tasks],
    }


def event_json(event: Event) -> dict[str, Any]:
    """One move of a job's own timeline (leased, failed, queued again, ...)."""
    return {
        "task_id": event.task_id,
        "at": rfc3339(event.at),
        "type": event.type,
        "detail": event.detail,
    }
