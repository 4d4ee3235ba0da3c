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
from watchkeeper.redact import MASK, redact

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
    body["payload"] = shown_payload(task.payload)
    if task.status is TaskStatus.QUEUED:
        reason = blocked.get(task.id)
        body["blocked"] = None if reason is None else reason.as_dict()
    if marks is not None:
        body["interrupted"] = task.id in marks
        body["interrupted_at"] = marks.get(task.id)
    return body


def shown_payload(payload: Any) -> Any:
    """A payload as readers see it: every text redacted. The store keeps it as given (a
    runner needs the real command); the lease hands it over whole, to the runner alone."""
    if isinstance(payload, str):
        return redact(payload)
    if isinstance(payload, list):
        return [_shown_word(payload, i) for i in range(len(payload))]
    if isinstance(payload, dict):
        return {key: shown_payload(value) for key, value in payload.items()}
    return payload


def _shown_word(words: list[Any], at: int) -> Any:
    """One word of a command redacted, alone and after the two before it: ``--password X``
    and ``curl -u user:pw`` hide their secret only in the words that come before it."""
    word = words[at]
    if not isinstance(word, str):
        return shown_payload(word)
    alone = redact(word)
    before = [w for w in words[max(0, at - 2) : at] if isinstance(w, str)]
    if before and not redact(" ".join([*before, word])).endswith(alone):
        return MASK
    return alone


def job_json(
    job: Job, blocked: Mapping[str, Blocked], marks: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A job with its rolled-up status and its tasks; ``unreadable_tasks`` names those
    whose stored rows cannot be read (left out of ``tasks``) and ``unreadable`` shows
    what can be read of each (a task a lease set aside is ``failed`` with its reason),
    only when there are some."""
    body: dict[str, Any] = {
        "id": job.id,
        "title": job.title,
        "org": job.org,
        "fleet": job.fleet,
        "payload": shown_payload(job.payload),
        "submitted_by": job.submitted_by,
        "created_at": rfc3339(job.created_at),
        "origin": job.origin,
        "status": rollup.of_job(job).value,
        "tasks": [task_json(task, blocked, marks) for task in job.tasks],
    }
    if job.unreadable_tasks:
        body["unreadable_tasks"] = list(job.unreadable_tasks)
        body["unreadable"] = [task.as_dict() for task in job.unreadable]
    return body


def event_json(event: Event) -> dict[str, Any]:
    """One move of a job's own timeline (leased, failed, queued again, ...)."""
    return {
        "task_id": event.task_id,
        "at": rfc3339(event.at),
        "type": event.type,
        "detail": event.detail,
    }
