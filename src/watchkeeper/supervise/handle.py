"""The handle of a started supervisor and its read-only snapshots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from watchkeeper.supervise.scope import StopsOnExit

if TYPE_CHECKING:
    from watchkeeper.supervise.events import Subscription
    from watchkeeper.supervise.spec import ChildSpec


@dataclass(frozen=True)
class ChildInfo:
    """A snapshot of one child."""

    name: str
    state: str
    pid: int | None
    restarts: int
    attempt: int
    last_beat: float | None
    #: How its last incarnation ended (``reason: detail``); ``None`` if it never ended.
    last_exit: str | None = None
    #: When its pending restart is due (supervisor clock), while it waits out a backoff.
    restart_at: float | None = None
    #: Why it is held, while its ``hold`` keeps it from starting.
    held: str | None = None
    #: When its running incarnation started (supervisor clock), while it runs.
    started_at: float | None = None


@dataclass(frozen=True)
class SupervisorStatistics:
    """A snapshot of a supervisor's counters."""

    path: str
    restarts: int
    restarts_in_window: int
    running: int
    events_dropped: int
    finished: bool


class _Tree(Protocol):
    """What the handle needs of the supervisor it holds (the supervisor imports the handle)."""

    path: str

    @property
    def finished(self) -> bool: ...
    async def stop(self) -> None: ...
    async def wait(self) -> None: ...
    async def add_child(self, spec: ChildSpec) -> None: ...
    async def restart_child(self, name: str) -> None: ...
    async def stop_child(self, name: str) -> None: ...
    async def fail_child(self, name: str, detail: str) -> None: ...
    def release_held(self) -> None: ...
    def subscribe(self, maxsize: int | None = None) -> Subscription: ...
    def children(self) -> tuple[ChildInfo, ...]: ...
    def last_beat(self, name: str) -> float | None: ...
    def statistics(self) -> SupervisorStatistics: ...


class SupervisorHandle(StopsOnExit):
    """What the code that started a supervisor holds: stop, wait, observe, extend.

    Usable as an async context manager that stops the tree on exit.
    """

    def __init__(self, supervisor: _Tree) -> None:
        self._sup = supervisor

    @property
    def path(self) -> str:
        """The supervisor's path in its tree (its name for a root)."""
        return self._sup.path

    @property
    def finished(self) -> bool:
        """True once the supervisor has stopped or given up."""
        return self._sup.finished

    async def stop(self) -> None:
        """Stop every child in reverse start order; harmless if already stopped."""
        await self._sup.stop()

    async def wait(self) -> None:
        """Wait until the supervisor ends; raises RestartIntensityExceeded if it gave up."""
        await self._sup.wait()

    async def add_child(self, spec: ChildSpec) -> None:
        """Start a new child; only for supervisors built with ``.dynamic()``."""
        await self._sup.add_child(spec)

    async def restart_child(self, name: str) -> None:
        """Stop the named child if it runs and start it again, on request."""
        await self._sup.restart_child(name)

    async def stop_child(self, name: str) -> None:
        """Stop the named child and leave it stopped until it is restarted on request."""
        await self._sup.stop_child(name)

    async def fail_child(self, name: str, detail: str) -> None:
        """Restart the named child as unhealthy, counted in the intensity like a crash."""
        await self._sup.fail_child(name, detail)

    def release_held(self) -> None:
        """Start the held children whose hold has cleared."""
        self._sup.release_held()

    def subscribe(self, maxsize: int | None = None) -> Subscription:
        """A bounded subscription to this tree's events."""
        return self._sup.subscribe(maxsize)

    def children(self) -> tuple[ChildInfo, ...]:
        """A snapshot of every child, in start order."""
        return self._sup.children()

    def last_beat(self, name: str) -> float | None:
        """Clock time of the named child's last heartbeat (or start)."""
        return self._sup.last_beat(name)

    def statistics(self) -> SupervisorStatistics:
        """A snapshot of the supervisor's counters."""
        return self._sup.statistics()
