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
class Stop:
    """Stop the tree; ``done`` resolves once every child is down."""

    done: asyncio.Future[None] = field(compare=False)


#: Everything the actor's mailbox carries.
Msg = Exit | Hung | RestartDue | Add | Command | Stop


def first_of(
    *futures: asyncio.Future[object] | asyncio.Future[Outcome] | asyncio.Future[None],
) -> asyncio.Future[object]:
    """A future that completes as soon as any of ``futures`` does."""
    first: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    def settle(_: object) -> None:
        if not first.done():
            first.set_result(None)

    for fut in futures:
        fut.add_done_callback(settle)
    return first
