"""Runners: one running incarnation of a child (coroutine, subprocess or supervisor).

A runner resolves ``ready`` when the child signalled it is up and ``exited``
with an :class:`Outcome` when it stopped. Subprocess exits are noticed through
a pidfd registered with the event loop, so nothing polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from watchkeeper.supervise.clock import Clock, wait_until_done
from watchkeeper.supervise.events import ExitReason
from watchkeeper.supervise.spec import ChildSpec, CoroutineTarget, ProcessTarget

logger = logging.getLogger(__name__)

NOTIFY_FD_ENV = "WATCHKEEPER_NOTIFY_FD"

HeartbeatHook = Callable[[str | None], None]


@dataclass(frozen=True)
class Outcome:
    """How one incarnation of a child ended."""

    reason: ExitReason
    detail: str
    exit_code: int | None = None


class Runner:
    """Base of the three runner kinds; owns the ``ready`` and ``exited`` futures."""

    def __init__(self, spec: ChildSpec, path: str, clock: Clock) -> None:
        self.spec = spec
        self.path = path
        self.clock = clock
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.exited: asyncio.Future[Outcome] = loop.create_future()
        self.stopping = False

    @property
    def pid(self) -> int | None:
        return None

    def launch(self) -> None:
        """Start the child; raises ``OSError`` (or the factory's error) if it cannot."""
        raise NotImplementedError

    async def stop(self) -> Outcome:
        """Stop the child within its shutdown timeout, forcefully if need be."""
        raise NotImplementedError

    def _finish(self, outcome: Outcome) -> None:
        if not self.exited.done():
            self.exited.set_result(outcome)

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


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # ESRCH: the group is already empty; EPERM: the pgid now belongs to someone else.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _describe_status(code: int) -> tuple[ExitReason, str]:
    if code == 0:
        return ExitReason.NORMAL, "exit status 0"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return ExitReason.KILLED, f"killed by {name}"
    return ExitReason.ERROR, f"exit status {code}"


class ProcessRunner(Runner):
    """Runs argv in a new session; stopping sends SIGTERM then SIGKILL to the group."""

    def __init__(self, spec: ChildSpec, path: str, clock: Clock, beat: HeartbeatHook) -> None:
        super().__init__(spec, path, clock)
        assert isinstance(spec.target, ProcessTarget)
        self.target: ProcessTarget = spec.target
        self._beat = beat
        self._popen: subprocess.Popen[bytes] | None = None
        self._pidfd: int | None = None
        self._notify_fd: int | None = None
        self._notify_buf = b""

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def launch(self) -> None:
        env = dict(os.environ)
        if self.target.env is not None:
            env.update(self.target.env)
        pass_fds: tuple[int, ...] = ()
        write_fd = -1
        if self.target.notify:
            self._notify_fd, write_fd = os.pipe()
            env[NOTIFY_FD_ENV] = str(write_fd)
            pass_fds = (write_fd,)
        try:
            self._popen = subprocess.Popen(
                list(self.target.argv),
                env=env,
                cwd=self.target.cwd,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=pass_fds,
            )
        except OSError:
            self._close_notify()
            raise
        finally:
            if write_fd >= 0:
                os.close(write_fd)
        self._watch_exit()
        if self._notify_fd is not None:
            os.set_blocking(self._notify_fd, False)
            asyncio.get_running_loop().add_reader(self._notify_fd, self._on_notify)
        if not self.spec.wait_ready:
            self._mark_ready()

    def _watch_exit(self) -> None:
        assert self._popen is not None
        loop = asyncio.get_running_loop()
        try:
            self._pidfd = os.pidfd_open(self._popen.pid)
        except (AttributeError, OSError):
            # No pidfd on this kernel: a worker thread blocks in waitpid instead.
            popen = self._popen
            fut = loop.run_in_executor(None, popen.wait)
            fut.add_done_callback(lambda _: self._on_exit())
            return
        loop.add_reader(self._pidfd, self._on_exit)

    def _on_exit(self) -> None:
        assert self._popen is not None
        code = self._popen.poll()
        if code is None:
            return
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        # Whatever the leader left behind in its group goes with it.
        _signal_group(self._popen.pid, signal.SIGKILL)
        self._drain_notify()
        self._close_notify()
        reason, detail = _describe_status(code)
        if self.stopping:
            reason = ExitReason.SHUTDOWN
        self._finish(Outcome(reason, detail, code))

    def _on_notify(self) -> None:
        self._drain_notify()

    def _drain_notify(self) -> None:
        if self._notify_fd is None:
            return
        try:
            chunk = os.read(self._notify_fd, 4096)
        except BlockingIOError:
            return
        if not chunk:
            self._close_notify()
            return
        self._notify_buf += chunk
        *lines, self._notify_buf = self._notify_buf.split(b"\n")
        for line in lines:
            self._on_notify_line(line.strip().decode("utf-8", "replace"))

    def _on_notify_line(self, line: str) -> None:
        if line == "READY=1":
            self._mark_ready()
        elif line == "WATCHDOG=1":
            self._beat(None)
        elif line.startswith("STATUS="):
            self._beat(line.removeprefix("STATUS="))

    def _close_notify(self) -> None:
        if self._notify_fd is not None:
            with contextlib.suppress(ValueError, RuntimeError):
                asyncio.get_running_loop().remove_reader(self._notify_fd)
            os.close(self._notify_fd)
            self._notify_fd = None

    async def stop(self) -> Outcome:
        self.stopping = True
        if self._popen is None or self.exited.done():
            return (
                self.exited.result()
                if self.exited.done()
                else Outcome(ExitReason.SHUTDOWN, "never started")
            )
        _signal_group(self._popen.pid, signal.SIGTERM)
        deadline = self.clock.now() + self.spec.shutdown_timeout_s
        if not await wait_until_done(self.exited, self.clock, deadline):  # type: ignore[arg-type]
            logger.warning(
                "child %s/%s (pid %d) ignored SIGTERM for %.1f s; sending SIGKILL",
                self.path,
                self.spec.name,
                self._popen.pid,
                self.spec.shutdown_timeout_s,
                extra={"action": "kill_child"},
            )
            _signal_group(self._popen.pid, signal.SIGKILL)
        return await asyncio.shield(self.exited)


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
