"""The bodies the queue's routes take (``server/api/queue.py``): jobs, runners, leases,
outcomes and output, each field bounded as its column is."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from watchkeeper.queue.output import CHUNK_TEXT_MAX, TAIL_BYTES
from watchkeeper.server.api.fields import ExitCode, JsonObject, Line, Pid, Text
from watchkeeper.server.api.schemas import REASON_MAX, STEP_MAX, TITLE_MAX

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
QueueName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
ID_PATTERN = r"^[a-z]-[0-9a-f]{1,60}$"
Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
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
    origin: Annotated[str, Line(300)] | None = Field(
        default=None,
        description="the pull request or issue it came from, `github:OWNER/REPO#N`: labelled "
        "`watchkeeper:waiting` now, told how the job ended when it ends",
    )


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


class OutcomeIn(_Body):
    """One task's outcome in ``POST /api/v1/tasks/outcomes``: failed when it has a
    ``reason``, else succeeded."""

    task_id: Id
    lease_token: LeaseToken
    exit_code: ExitCode | None = 0
    reason: Annotated[str, Text(REASON_MAX, min_length=1)] | None = None
    fingerprint: Annotated[str, Line(200)] | None = None


class OutcomesIn(_Body):
    """``POST /api/v1/tasks/outcomes``: outcomes a runner has at once, recorded together."""

    outcomes: list[OutcomeIn] = Field(min_length=1, max_length=100)


class LeaseIn(_Body):
    """``POST /api/v1/runners/{id}/lease``: how many tasks the runner can take now, and
    the outcomes it has to report first (recorded in the same transaction)."""

    max: int = Field(default=1, ge=1, le=100)
    outcomes: list[OutcomeIn] | None = Field(default=None, max_length=100)


class OutputIn(_Body):
    """``POST /api/v1/tasks/{id}/output``: the tail of what the task printed, as it ends."""

    lease_token: LeaseToken
    output: Annotated[str, Text(TAIL_BYTES)]


class ChunkIn(_Body):
    """``POST /api/v1/tasks/{id}/output/chunks``: what the task's log gained, bytes ``offset``
    to ``end`` of it, as redacted text; ``final`` on the last piece, once the task ended."""

    lease_token: LeaseToken
    offset: int = Field(ge=0)
    end: int = Field(ge=0)
    output: Annotated[str, Text(CHUNK_TEXT_MAX)]
    final: bool = False
    run_id: Annotated[str, Line(64)] | None = None
    host: Annotated[str, Line(255)] | None = None
