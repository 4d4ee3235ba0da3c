"""What the supervisor's actor keeps per child, and the messages its mailbox carries."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from watchkeeper.supervise.children import Outcome, Runner
from watchkeeper.supervise.clock import Timer
from watchkeeper.supervise.spec import ChildSpec


class SlotState(enum.StrEnum):
    """Where a child is in its life."""

    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    RESTART_PENDING = "restart_pending"
    HELD = "held"
    DONE = "done"


@dataclass(eq=False)
class Slot:
    """One child of the supervisor: its spec, its runner and its restart bookkeeping."""

    spec: ChildSpec
    state: SlotState = SlotState.IDLE
    runner: Runner | None = None
    attempt: int = 0
    restarts: int = 0
    started_at: float = 0.0
    last_beat: float | None = None
    last_beat_event: float = float("-inf")
    hb_timer: Timer | None = None
    token: object | None = None
    #: How the child's last incarnation ended (``reason: detail``), if one has.
    last_exit: str | None = None
    #: When its pending restart is due (clock time), while it waits out a backoff.
    restart_at: float | None = None
    #: Why it is held (its ``hold``'s answer), while it is.
    held: str | None = None
    #: Resolved to stop waiting for its current start (a stop asked for meanwhile).
    interrupt: asyncio.Future[None] | None = None


@dataclass(frozen=True)
class Exit:
    """The child run by ``runner`` ended with ``outcome``."""

    slot: Slot
    runner: Runner
    outcome: Outcome


@dataclass(frozen=True)
class Hung:
    """The child run by ``runner`` missed its heartbeat deadline."""

    slot: Slot
    runner: Runner


@dataclass(frozen=True)
class RestartDue:
    """The backoff of the restart group marked ``token`` is over."""

    token: object


@dataclass(frozen=True)
class Add:
    """Start ``spec`` as a new child; ``done`` resolves once it is up or failed."""

    spec: ChildSpec
    done: asyncio.Future[None] = field(compare=False)


@dataclass(frozen=True)
class Command:
    """Restart or stop the child called ``child`` on request; ``done`` says how it went."""

    child: str
    restart: bool
    done: asyncio.Future[None] = field(compare=False)


@dataclass(frozen=True)
class Unhealthy:
    """The child called ``child`` failed a health check: restart it as an abnormal exit."""

    child: str
    detail: str
    done: asyncio.Future[None] = field(compare=False)


@dataclass(frozen=True)
class Release:
    """Start the held children whose hold no longer holds them."""


@dataclass(frozen=True)
class Stop:
    """Stop the tree; ``done`` resolves once every child is down."""

    done: asyncio.Future[None] = field(compare=False)


#: Everything the actor's mailbox carries.
Msg = Exit | Hung | RestartDue | Add | Command | Unhealthy | Release | Stop


def interrupt(slot: Slot) -> None:
    """Stop waiting for ``slot`` to become ready, if it is starting."""
    if slot.interrupt is not None and not slot.interrupt.done():
        slot.interrupt.set_result(None)


def first_of(
    *futures: asyncio.Future[object] | asyncio.Future[Outcome] | asyncio.Future[None] | None,
) -> asyncio.Future[object]:
    """A future that completes as soon as any of ``futures`` does."""
    first: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    def settle(_: object) -> None:
        if not first.done():
            first.set_result(None)

    for fut in futures:
        if fut is not None:
            fut.add_done_callback(settle)
    return first
