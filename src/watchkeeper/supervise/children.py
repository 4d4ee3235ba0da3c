"""Runners: one running incarnation of a child (coroutine, subprocess or supervisor).

A runner resolves ``ready`` when the child signalled it is up and ``exited``
with an :class:`Outcome` when it stopped. Subprocess runners live in
:mod:`watchkeeper.supervise.process`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from watchkeeper.supervise.clock import Clock, wait_until_done
from watchkeeper.supervise.events import ExitReason
from watchkeeper.supervise.spec import ChildSpec, CoroutineTarget

logger = logging.getLogger(__name__)

HeartbeatHook = Callable[[str | None], None]


@dataclass(frozen=True)
class Outcome:
    """How one incarnation of a child ended."""

    reason: ExitReason
    detail: str
    exit_code: int | None = None


class Runner(ABC):
    """Base of the three runner kinds; owns the ``ready`` and ``exited`` futures."""

    def __init__(self, spec: ChildSpec, path: str, clock: Clock) -> None:
        self.spec = spec
        self.path = path
        self.clock = clock
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.exited: asyncio.Future[Outcome] = loop.create_future()
        #: Called with the outcome as the child ends, in the same turn of the loop: a
        #: done-callback of ``exited`` would run a turn later, and a restart waits on it.
        self.on_exit: Callable[[Outcome], None] | None = None
        self.stopping = False

    @property
    def pid(self) -> int | None:
        return None

    @abstractmethod
    def launch(self) -> None:
        """Start the child; raises ``OSError`` (or the factory's error) if it cannot."""

    @abstractmethod
    async def stop(self) -> Outcome:
        """Stop the child within its shutdown timeout, forcefully if need be."""

    def _finish(self, outcome: Outcome) -> None:
        if not self.exited.done():
            self.exited.set_result(outcome)
            if self.on_exit is not None:
                self.on_exit(outcome)

    def _mark_ready(self) -> None:
        if not self.ready.done():
            self.ready.set_result(None)


class _Context:
    """The :class:`~watchkeeper.supervise.spec.ChildContext` given to coroutine children."""

    def __init__(self, runner: CoroutineRunner, attempt: int, beat: HeartbeatHook) -> None:
        self._runner = runner
        self._attempt = attempt
        self._beat = beat

    @property
    def name(self) -> str:
        return self._runner.spec.name

    @property
    def path(self) -> str:
        return self._runner.path

    @property
    def attempt(self) -> int:
        return self._attempt

    def started(self) -> None:
        self._runner._mark_ready()

    def heartbeat(self, step: str | None = None) -> None:
        self._beat(step)


class CoroutineRunner(Runner):
    """Runs ``factory(context)`` as a task; stopping cancels it, then abandons it."""

    def __init__(
        self, spec: ChildSpec, path: str, clock: Clock, attempt: int, beat: HeartbeatHook
    ) -> None:
        super().__init__(spec, path, clock)
        assert isinstance(spec.target, CoroutineTarget)
        self._context = _Context(self, attempt, beat)
        self._task: asyncio.Task[None] | None = None

    def launch(self) -> None:
        assert isinstance(self.spec.target, CoroutineTarget)
        factory = self.spec.target.factory

        async def body() -> None:
            await factory(self._context)

        self._task = asyncio.create_task(body(), name=f"{self.path}/{self.spec.name}")
        self._task.add_done_callback(self._on_done)
        if not self.spec.wait_ready:
            self._mark_ready()

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            reason = ExitReason.SHUTDOWN if self.stopping else ExitReason.ERROR
            self._finish(Outcome(reason, "cancelled"))
            return
        exc = task.exception()
        if exc is None:
            self._finish(Outcome(ExitReason.NORMAL, "returned"))
        elif self.stopping:
            self._finish(Outcome(ExitReason.SHUTDOWN, f"raised while stopping: {exc!r}"))
        else:
            self._finish(Outcome(ExitReason.ERROR, f"raised {exc!r}"))

    async def stop(self) -> Outcome:
        self.stopping = True
        if self._task is None:
            return Outcome(ExitReason.SHUTDOWN, "never started")
        self._task.cancel()
        deadline = self.clock.now() + self.spec.shutdown_timeout_s
        if await wait_until_done(self.exited, self.clock, deadline):  # type: ignore[arg-type]
            return self.exited.result()
        logger.warning(
            "coroutine child %s/%s ignored cancellation for %.1f s; abandoning it",
            self.path,
            self.spec.name,
            self.spec.shutdown_timeout_s,
            extra={"action": "abandon_child"},
        )
        outcome = Outcome(ExitReason.SHUTDOWN, "abandoned after ignoring cancellation")
        self._finish(outcome)
        return outcome


class SupervisorLike(Protocol):
    """What a nested supervisor offers to the runner that hosts it."""

    async def start_children(self) -> None: ...

    async def wait(self) -> None: ...

    async def stop(self) -> None: ...


class NestedRunner(Runner):
    """Hosts a nested supervisor: ready when its children are, exits when it gives up."""

    def __init__(
        self, spec: ChildSpec, path: str, clock: Clock, make: Callable[[], SupervisorLike]
    ) -> None:
        super().__init__(spec, path, clock)
        self._make = make
        self._sup: SupervisorLike | None = None
        self._task: asyncio.Task[None] | None = None

    def launch(self) -> None:
        self._sup = self._make()
        self._task = asyncio.create_task(self._run(self._sup), name=f"{self.path}/{self.spec.name}")
        self._task.add_done_callback(self._on_done)

    async def _run(self, sup: SupervisorLike) -> None:
        await sup.start_children()
        self._mark_ready()
        await sup.wait()

    def _on_done(self, task: asyncio.Task[None]) -> None:
        from watchkeeper.supervise.errors import RestartIntensityExceeded, StartError

        if task.cancelled():
            self._finish(Outcome(ExitReason.SHUTDOWN, "cancelled"))
            return
        exc = task.exception()
        if exc is None:
            reason = ExitReason.SHUTDOWN if self.stopping else ExitReason.NORMAL
            self._finish(Outcome(reason, "supervisor stopped"))
        elif isinstance(exc, RestartIntensityExceeded):
            self._finish(Outcome(ExitReason.GAVE_UP, str(exc)))
        elif isinstance(exc, StartError):
            self._finish(Outcome(ExitReason.ERROR, str(exc)))
        else:
            self._finish(Outcome(ExitReason.ERROR, f"supervisor crashed: {exc!r}"))

    async def stop(self) -> Outcome:
        self.stopping = True
        if self._sup is None or self._task is None:
            return Outcome(ExitReason.SHUTDOWN, "never started")
        deadline = self.clock.now() + self.spec.shutdown_timeout_s
        stopper = asyncio.ensure_future(self._sup.stop())
        if not await wait_until_done(stopper, self.clock, deadline):  # type: ignore[arg-type]
            logger.warning(
                "nested supervisor %s/%s did not stop within %.1f s; cancelling it",
                self.path,
                self.spec.name,
                self.spec.shutdown_timeout_s,
                extra={"action": "abandon_child"},
            )
            stopper.cancel()
            self._task.cancel()
        elif not stopper.cancelled() and (error := stopper.exception()) is not None:
            logger.error(
                "nested supervisor %s/%s failed while stopping: %r",
                self.path,
                self.spec.name,
                error,
                extra={"action": "stop_child"},
            )
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((self._task,))
        return await asyncio.shield(self.exited)
