"""What the host keeps about each program and each group while it runs them."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from watchkeeper.programs.output import ProgramLog
from watchkeeper.programs.plan import GroupPlan, ProgramPlan
from watchkeeper.supervise import Subscription, Supervisor, SupervisorGaveUp

#: Moments kept per program for its page and the API.
HISTORY = 50
#: The hold's answer for a program nobody wants running (stopped, or autostart off).
NOT_WANTED = "stopped"


@dataclass(frozen=True, slots=True)
class Moment:
    """One thing that happened to a program: when, what kind of thing, and in words."""

    at: datetime
    event: Literal["started", "exited", "restarting", "paused", "unhealthy", "gave_up", "stopped"]
    text: str


@dataclass
class ProgramState:
    """One program of this host."""

    plan: ProgramPlan
    log: ProgramLog
    #: What the people who run it want: running, or stopped.
    wanted: bool
    history: deque[Moment] = field(default_factory=lambda: deque(maxlen=HISTORY))
    #: Each health check's latest answer: name to (status, detail).
    health: dict[str, tuple[str, str]] = field(default_factory=dict)
    health_task: asyncio.Task[None] | None = None
    #: Whether its run was recorded since this server started (a move needs one).
    recorded: bool = False
    #: Restarts since the server started, across the group supervisors it had.
    restarts: int = 0

    @property
    def name(self) -> str:
        """The program's name."""
        return self.plan.name


@dataclass
class GroupRun:
    """One group's supervisor (a new one after each give-up or stop) and what it said."""

    plan: GroupPlan
    supervisor: Supervisor
    events: Subscription
    state: Literal["running", "stopped", "gave_up"] = "running"
    gave_up: SupervisorGaveUp | None = None
    gave_up_at: datetime | None = None
    #: The program whose crash loop made the group give up.
    culprit: str | None = None
    #: Why its programs are being stopped, while they are (a person, the server).
    stopping: str | None = None
    follower: asyncio.Task[None] | None = None
    handling: bool = False
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    #: Restarts counted by earlier supervisors of the group.
    restarts_before: int = 0

    @property
    def name(self) -> str:
        """The group's name."""
        return self.plan.name

    async def settled(self) -> None:
        """Wait until every event the supervisor published has been handled."""
        while self.handling or self.events.qsize():
            self.idle.clear()
            await self.idle.wait()
