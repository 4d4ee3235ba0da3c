"""The domain records of process runs, parks and sessions: frozen, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from watchkeeper.records.filling import UnreadableValue, enum_of, record_from_mapping


class ProcStatus(StrEnum):
    """What the store says about a run; ``starting`` until the shim reports its pids."""

    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        """True once the run can no longer move."""
        return self not in (ProcStatus.STARTING, ProcStatus.RUNNING)


ACTIVE = (ProcStatus.STARTING, ProcStatus.RUNNING)


class HookState(StrEnum):
    """The completion-hook journal: only ever moves forward.

    ``none`` (no hooks) | ``waiting`` (run active) -> ``pending`` (run ended) ->
    ``firing`` (committed before firing) -> ``fired`` / ``failed``; a ``firing``
    row found at start-up becomes ``maybe_fired`` and is never fired again.
    """

    NONE = "none"
    WAITING = "waiting"
    PENDING = "pending"
    FIRING = "firing"
    FIRED = "fired"
    FAILED = "failed"
    MAYBE_FIRED = "maybe_fired"


class AbortOutcome(StrEnum):
    """What ``abort`` did."""

    SIGNALED = "signaled"
    ALREADY_EXITED = "already_exited"
    NOT_OURS = "not_ours"


class ParkState(StrEnum):
    """Where a parked session is: waiting on its run, woken, held by the breaker, or
    superseded (the session was woken for a newer park, so this one never wakes it)."""

    WAITING = "waiting"
    WOKEN = "woken"
    SUPPRESSED = "suppressed"
    SUPERSEDED = "superseded"


@dataclass(frozen=True, slots=True)
class NewProc:
    """What ``watchkeeper run`` registers before anything starts."""

    run_id: str
    name: str
    argv: tuple[str, ...]
    cwd: str
    host: str
    user: str
    boot_id: str | None
    detach: bool
    budget_s: float | None = None
    timeout_s: float | None = None
    origin: dict[str, str] | None = None
    session: str | None = None
    on_done_cmd: str | None = None
    on_done_url: str | None = None


@dataclass(frozen=True, slots=True)
class Started:
    """What the shim reports once the command runs: who owns the run."""

    shim_pid: int
    shim_start: str
    pid: int
    pid_start: str
    pgid: int


#: How a run's engine key begins when the run is a server's record of a run on another
#: engine (a command line's host), which reports it: ``reported:<host>:<data folder>``.
REPORTED_PREFIX = "reported:"


@dataclass(frozen=True, slots=True)
class ProcRun:
    """One stored process run."""

    run_id: str
    name: str
    argv: tuple[str, ...]
    cwd: str
    host: str
    user: str
    boot_id: str | None
    status: ProcStatus
    detach: bool
    shim_pid: int | None
    shim_start: str | None
    pid: int | None
    pid_start: str | None
    pgid: int | None
    budget_s: float | None
    timeout_s: float | None
    origin: dict[str, str] | None
    session: str | None
    on_done_cmd: str | None
    on_done_url: str | None
    created_at: datetime
    started_at: datetime | None
    progress_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    abort_requested_at: datetime | None
    exit_code: int | None
    signal: int | None
    reason: str | None
    step: str | None
    log_size: int
    log_mtime: float | None
    version: int
    hook_state: HookState
    hook_error: str | None
    #: The engine that settles the run: ``<host>:<data folder>``, or for a run another
    #: engine reports to this store, that engine's key after :data:`REPORTED_PREFIX`.
    engine_key: str = ""

    @property
    def reported(self) -> bool:
        """Whether the run is settled by another engine, which reports it here."""
        return self.engine_key.startswith(REPORTED_PREFIX)

    @property
    def state_token(self) -> str:
        """Changes whenever the run moves (a step, log growth, an end)."""
        return f"p{self.version}"

    @property
    def has_hooks(self) -> bool:
        """Whether anything waits to be told when the run ends."""
        return bool(self.on_done_cmd or self.on_done_url)

    def duration_s(self, now: datetime) -> float | None:
        """Seconds from start to end (or to ``now`` while it runs)."""
        if self.started_at is None:
            return None
        end = self.finished_at or now
        return max(0.0, (end - self.started_at).total_seconds())

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for JSON answers and hook payloads."""
        from watchkeeper.clock import rfc3339

        return {
            "id": self.run_id,
            "name": self.name,
            "argv": list(self.argv),
            "cwd": self.cwd,
            "host": self.host,
            "user": self.user,
            "status": self.status.value,
            "detach": self.detach,
            "pid": self.pid,
            "pgid": self.pgid,
            "shim_pid": self.shim_pid,
            "budget_s": self.budget_s,
            "timeout_s": self.timeout_s,
            "origin": self.origin,
            "session": self.session,
            "created_at": rfc3339(self.created_at),
            "started_at": rfc3339(self.started_at),
            "progress_at": rfc3339(self.progress_at),
            "finished_at": rfc3339(self.finished_at),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "reason": self.reason,
            "step": self.step,
            "log_size": self.log_size,
            "state_token": self.state_token,
            "hook_state": self.hook_state.value,
            "hook_error": self.hook_error,
        }


@dataclass(frozen=True, slots=True)
class Park:
    """A session that handed back, waiting on a run."""

    id: int
    session: str
    reason: str
    until_run: str
    wake_cmd: str | None
    state: ParkState
    parked_at: datetime
    woken_at: datetime | None
    note: str | None


@dataclass(frozen=True, slots=True)
class SessionBreaker:
    """The wake breaker of one session."""

    session: str
    wakes_without_progress: int
    progress_at: datetime | None
    progress_note: str | None
    last_wake_at: datetime | None


#: The epoch columns of a ``proc_runs`` row.
RUN_TIMES = (
    "created_at",
    "started_at",
    "progress_at",
    "finished_at",
    "updated_at",
    "abort_requested_at",
)


def run_from_columns(columns: Mapping[Any, Any]) -> ProcRun:
    """A ``proc_runs`` row as a record, its JSON columns (``argv``, ``origin``) decoded;
    :class:`UnreadableValue` when a column holds what the record cannot."""
    argv = columns["argv"]
    if not isinstance(argv, list | tuple) or not all(isinstance(arg, str) for arg in argv):
        raise UnreadableValue("argv", argv, "not a list of arguments")
    return record_from_mapping(
        ProcRun,
        columns,
        times=RUN_TIMES,
        check=True,
        argv=tuple(argv),
        user=columns["username"],
        status=enum_of(ProcStatus, columns, "status"),
        detach=bool(columns["detach"]),
        hook_state=enum_of(HookState, columns, "hook_state"),
    )
