"""The queue's domain records: jobs, tasks, runners, leases. Frozen, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from watchkeeper.clock import rfc3339


class TaskStatus(StrEnum):
    """Where a task is. ``stuck``: its lease lapsed and it may not run again on its own."""

    QUEUED = "queued"
    RUNNING = "running"
    STUCK = "stuck"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        """True once the task cannot move by itself or by a runner."""
        return self in (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED)


class JobStatus(StrEnum):
    """A job's status, rolled up from its tasks (see :mod:`watchkeeper.queue.rollup`)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: Statuses a cancel stops, a retry restarts.
CANCELLABLE = (TaskStatus.QUEUED, TaskStatus.RUNNING, TaskStatus.STUCK)
RETRYABLE = (TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.STUCK)
OUT_OF_ATTEMPTS = "out_of_attempts"


@dataclass(frozen=True, slots=True)
class NewJob:
    """What a submitter sends: one job and the payload of its first task."""

    title: str
    org: str
    fleet: str
    payload: dict[str, Any]
    submitted_by: str
    rerunnable: bool = True
    max_attempts: int = 3
    lease_s: float = 60.0
    #: Where it came from (``github:OWNER/REPO#N``): its end is posted there.
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a job: the first (``seq`` 0) or a continuation."""

    id: str
    job_id: str
    seq: int
    org: str
    fleet: str
    payload: dict[str, Any]
    status: TaskStatus
    rerunnable: bool
    attempt: int
    max_attempts: int
    version: int
    lease_s: float
    queued_at: datetime
    runner_id: str | None = None
    leased_at: datetime | None = None
    last_renewed_at: datetime | None = None
    progress_at: datetime | None = None
    finished_at: datetime | None = None
    step: str | None = None
    exit_code: int | None = None
    failure_reason: str | None = None
    failure_fingerprint: str | None = None

    @property
    def state_token(self) -> str:
        """Changes whenever the task moves."""
        return f"a{self.attempt}v{self.version}"

    @property
    def lease_expires_at(self) -> datetime | None:
        """When the current lease lapses unless renewed: counted from the last renewal."""
        from datetime import timedelta

        basis = self.last_renewed_at or self.leased_at
        return None if basis is None else basis + timedelta(seconds=self.lease_s)

    def as_dict(self) -> dict[str, Any]:
        """The task as the API shows it (never its lease token)."""
        return {
            "id": self.id,
            "job_id": self.job_id,
            "seq": self.seq,
            "org": self.org,
            "fleet": self.fleet,
            "payload": self.payload,
            "status": self.status.value,
            "rerunnable": self.rerunnable,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "state_token": self.state_token,
            "lease_s": self.lease_s,
            "queued_at": rfc3339(self.queued_at),
            "runner_id": self.runner_id,
            "leased_at": rfc3339(self.leased_at),
            "last_renewed_at": rfc3339(self.last_renewed_at),
            "lease_expires_at": rfc3339(self.lease_expires_at),
            "progress_at": rfc3339(self.progress_at),
            "finished_at": rfc3339(self.finished_at),
            "step": self.step,
            "exit_code": self.exit_code,
            "failure": None
            if self.failure_reason is None
            else {"reason": self.failure_reason, "fingerprint": self.failure_fingerprint},
        }


@dataclass(frozen=True, slots=True)
class Job:
    """One submitted piece of work with its tasks, ordered by ``seq``."""

    id: str
    title: str
    org: str
    fleet: str
    payload: dict[str, Any]
    submitted_by: str
    created_at: datetime
    tasks: tuple[Task, ...] = ()
    origin: str | None = None
    #: Tasks of the job whose stored rows cannot be read: left out of ``tasks``, what
    #: can be read of each is here (its status counts in the job's).
    unreadable: tuple[UnreadableTask, ...] = ()

    @property
    def unreadable_tasks(self) -> tuple[str, ...]:
        """The ids of the tasks whose stored rows cannot be read."""
        return tuple(task.id for task in self.unreadable)


@dataclass(frozen=True, slots=True)
class UnreadableTask:
    """A task whose stored row cannot be read whole: what can be read of it.

    A lease that claims such a row sets it aside (``store/queue/setaside.py``): the
    task is ``failed`` with a reason naming the column and the value, and is never
    handed to a runner. ``None`` for a column that cannot be read either.
    """

    id: str
    #: What cannot be read: the column, the value and why.
    problem: str
    status: TaskStatus | None = None
    seq: int | None = None
    finished_at: datetime | None = None
    failure_reason: str | None = None
    failure_fingerprint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """As a job's ``unreadable`` list shows it."""
        return {
            "id": self.id,
            "problem": self.problem,
            "status": None if self.status is None else self.status.value,
            "seq": self.seq,
            "finished_at": rfc3339(self.finished_at),
            "failure": None
            if self.failure_reason is None
            else {"reason": self.failure_reason, "fingerprint": self.failure_fingerprint},
        }


@dataclass(frozen=True, slots=True)
class NewRunner:
    """What a runner says when it registers."""

    fleet: str
    capacity: int
    host: str
    pid: int
    org: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Runner:
    """A registered executor daemon. ``running`` counts the tasks it holds now."""

    id: str
    fleet: str
    capacity: int
    host: str
    pid: int
    org: str | None
    name: str | None
    registered_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None = None
    running: int = 0


@dataclass(frozen=True, slots=True)
class Lease:
    """A task just leased to a runner, with the token every later move must present.

    ``task_token`` is the API token handed to the task's own process: it may
    report only about this task, and it ends with the lease.
    """

    task: Task
    token: str
    task_token: str | None = None


@dataclass(frozen=True, slots=True)
class OrgLoad:
    """What an org uses now: jobs with a running task, agent-minutes this month."""

    org: str
    running_jobs: int = 0
    used_minutes: float = 0.0


@dataclass(frozen=True, slots=True)
class Provision:
    """The last cold start of a runner for (org, fleet)."""

    org: str
    fleet: str
    state: str  # provisioning | failed
    reason: str | None
    started_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class QueuedTask:
    """A queued task as the blocked-reason query sees it."""

    id: str
    job_id: str
    org: str
    fleet: str
    job_running: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the lease rules read, taken in one go (set-based, not per task)."""

    at: datetime
    runners: tuple[Runner, ...]
    loads: dict[str, OrgLoad] = field(default_factory=dict)
    provisions: dict[tuple[str, str], Provision] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Recovery:
    """What a lapsed-lease pass did, by task id."""

    requeued: tuple[str, ...] = ()
    stuck: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """How many tasks moved."""
        return len(self.requeued) + len(self.stuck) + len(self.failed)


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a task's timeline: append-only."""

    task_id: str
    at: datetime
    type: str
    detail: str | None = None
