"""The vocabulary every layer speaks: one read model for every kind of work.

Frozen dataclasses, enums and the failure fingerprint; nothing here does I/O. An adapter turns a
row of its own store into a :class:`RunView`; :func:`watchkeeper.judge.judge`
turns a ``RunView`` into a :class:`Verdict` or nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class RunStatus(StrEnum):
    """Where a piece of work is in its life, as its own store says."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"  # waits for a person: never stalled
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        """True once the work can no longer move by itself."""
        return self in _ENDED


_ENDED = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


class Condition(StrEnum):
    """What is wrong with a piece of work, in order of severity."""

    FAILED = "failed"
    STUCK = "stuck"
    STALLED = "stalled"
    LOOPING = "looping"  # reports keep coming, all saying the same thing
    SLOW = "slow"

    @property
    def paged(self) -> bool:
        """Slow work is shown, never paged; every other condition opens an incident."""
        return self is not Condition.SLOW


class Effects(StrEnum):
    """Whether the work may have changed something outside watchkeeper's reach."""

    NONE = "none"
    UNKNOWN = "unknown"


class OwnerKind(StrEnum):
    """How a run's owner is identified."""

    PID = "pid"
    LEASE = "lease"
    RUNNER = "runner"
    NONE = "none"


class Action(StrEnum):
    """The buttons a person may press on an incident."""

    CANCEL = "cancel"
    RETRY = "retry"
    RETRY_CHECKED = "retry_checked"
    CLOSE_TURN = "close_turn"
    DISMISS = "dismiss"
    DIAGNOSE = "diagnose"
    RESTART = "restart"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class Owner:
    """Who runs the work and whether it is alive.

    ``alive`` is ``None`` when liveness cannot be told (a process on another
    host, say); such an owner never makes work stuck. ``expires_at`` is when a
    lease-style owner stops counting as alive unless it reports again.
    """

    kind: OwnerKind = OwnerKind.NONE
    ident: str | None = None
    alive: bool | None = None
    expires_at: datetime | None = None


NO_OWNER = Owner()


@dataclass(frozen=True, slots=True)
class Origin:
    """Where the work started, so a card can go back there."""

    platform: str | None = None  # telegram, discord, slack, web
    chat_id: str | None = None
    thread_id: str | None = None
    message_id: str | None = None


NO_ORIGIN = Origin()


def origin_of(stored: Mapping[str, str] | None) -> Origin:
    """The origin a run's row stores as a mapping (``platform``, ``chat_id``...)."""
    if not stored:
        return NO_ORIGIN
    return Origin(
        platform=stored.get("platform"),
        chat_id=stored.get("chat_id"),
        thread_id=stored.get("thread_id"),
        message_id=stored.get("message_id"),
    )


@dataclass(frozen=True, slots=True)
class Failure:
    """Why work failed; ``fingerprint`` identifies "the same failure"."""

    reason: str
    fingerprint: str


#: What changes between two occurrences of one failure: addresses, ids, counts.
_VOLATILE = re.compile(r"0x[0-9a-f]+|[0-9a-f]{8,}|\d+")


def fingerprint(reason: str) -> str:
    """The fingerprint of a failure reason, the same for every kind.

    One incident is opened per fingerprint and Dismiss silences a fingerprint
    for good, so reasons that differ only in case, spacing, numbers, hex
    addresses or ids must share one: they are the same failure.
    """
    normalised = _VOLATILE.sub("#", " ".join(reason.lower().split()))
    return hashlib.sha256(normalised.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RunView:
    """What every adapter returns for one piece of work."""

    kind: str
    run_id: str
    title: str
    status: RunStatus
    state_token: str
    owner: Owner = NO_OWNER
    progress_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    expected_s: float | None = None
    budget_s: float | None = None
    origin: Origin = NO_ORIGIN
    effects: Effects = Effects.UNKNOWN
    failure: Failure | None = None
    step: str | None = None
    interrupted_at: datetime | None = None
    #: When the work last said where it is (or was last seen saying it), whether or not
    #: that moved it; ``None``: at ``progress_at``. A bare liveness ping is not a report.
    reported_at: datetime | None = None
    #: How many reports in a row said the same thing, the latest included (1: the latest
    #: said something new; 0: nothing to compare, such as a report that names nothing).
    repeats: int = 0
    #: What the repeated reports say, when ``step`` does not say it (an output line).
    repeating: str | None = None
    #: The budget and expected time the latest report gave its step, in force until the
    #: next report; the run's own apply when ``None``.
    step_budget_s: float | None = None
    step_expected_s: float | None = None
    #: Counters the work reports (pages, tests, tokens): ``done`` of ``total``.
    done: int | None = None
    total: int | None = None


#: Identical reports in a row that make running work looping, unless its kind says otherwise.
DEFAULT_LOOP_AFTER = 5


@dataclass(frozen=True, slots=True)
class KindSpec:
    """The judging rules of one kind: its progress budget, expected duration, and how many
    identical reports in a row make its work looping (0: never by count)."""

    name: str
    budget_s: float
    expected_s: float | None = None
    loop_after: int = DEFAULT_LOOP_AFTER


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judge's finding on one run.

    ``since`` is when the condition began (the budget ran out, the owner was
    last seen, the work failed). ``fingerprint`` is the failure fingerprint for
    ``failed`` and empty otherwise: it is part of an incident's identity.
    """

    condition: Condition
    since: datetime
    reason: str
    fingerprint: str = ""

    @property
    def paged(self) -> bool:
        """Whether this verdict opens an incident."""
        return self.condition.paged


@dataclass(frozen=True, slots=True)
class KindRead:
    """The outcome of reading one kind: its runs, or why it could not be read.

    A sweep read may leave out runs the adapter can show to be fine (an index
    answered "nothing wrong here"): ``total`` then counts every run considered
    and ``deadline`` is the earliest future deadline among those left out.
    """

    kind: str
    runs: tuple[RunView, ...] = ()
    error: str | None = None
    duration_s: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)
    total: int | None = None
    deadline: datetime | None = None

    @property
    def considered(self) -> int:
        """How many runs this read covered, shown or not."""
        return len(self.runs) if self.total is None else self.total

    @property
    def readable(self) -> bool:
        """An unreadable kind is shown with its error, never as "nothing running"."""
        return self.error is None
