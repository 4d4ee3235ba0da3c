"""Subprocess children: own session, exit noticed through a pidfd, group-wide stop.

The supervisor learns of an exit when the child's pidfd becomes readable on
the event loop, so nothing polls. Stopping sends SIGTERM to the whole process
group, then SIGKILL after the shutdown timeout; whatever the leader leaves in
its group when it exits is killed with it.

A child is started with libc's ``posix_spawn`` (see :mod:`.spawn`) where the
libc can do all Popen did, and with ``subprocess.Popen`` elsewhere; the child
gets the same either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from typing import Protocol

from watchkeeper.supervise import spawn
from watchkeeper.supervise.children import HeartbeatHook, Outcome, Runner
from watchkeeper.supervise.clock import Clock, Timer, wait_until_done
from watchkeeper.supervise.events import ExitReason
from watchkeeper.supervise.spec import ChildSpec, ProcessTarget

logger = logging.getLogger(__name__)

NOTIFY_FD_ENV = "WATCHKEEPER_NOTIFY_FD"


class _Child(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...


class _Spawned:
    """A child started with :func:`spawn.spawn`, reaped as Popen reaps its own."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code (negative for a signal) once the child has exited, reaping it."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Someone else reaped it (SIGCHLD ignored, say): Popen says 0 then too.
                self.returncode = 0
            else:
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        """Block until the child exits; its exit code."""
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = 0
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # ESRCH: the group is already empty; EPERM: the pgid now belongs to someone else.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _describe_status(code: int, normal: frozenset[int]) -> tuple[ExitReason, str]:
    if code in normal:
        return ExitReason.NORMAL, f"exit status {code}"
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
        self._child: _Child | None = None
        self._pidfd: int | None = None
        self._notify_fd: int | None = None
        self._notify_buf = b""
        self._launched_at = 0.0
        #: Set once the child has run ``ready_after_s``: an exit before is a failed start.
        self._ran_long_enough = self.target.ready_after_s is None
        self._ready_timer: Timer | None = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def launch(self) -> None:
        env = dict(os.environ)
        if self.target.env is not None:
            env.update(self.target.env)
        write_fd = -1
        if self.target.notify:
            self._notify_fd, write_fd = os.pipe()
        out = self.target.output() if self.target.output is not None else None
        # A descriptor of 0-2 here (the supervisor's own stdio closed) is left to Popen,
        # which sorts out such overlaps; the spawn's fixed numbering does not.
        low = min(fd for fd in (out, write_fd, 3) if fd is not None and fd >= 0)
        try:
            if spawn.available() and low > 2:
                if write_fd >= 0:
                    env[NOTIFY_FD_ENV] = str(spawn.NOTIFY_FD)
                self._child = _Spawned(
                    spawn.spawn(
                        self.target.argv, env, cwd=self.target.cwd, out=out, notify_fd=write_fd
                    )
                )
            else:
                if write_fd >= 0:
                    env[NOTIFY_FD_ENV] = str(write_fd)
                self._child = subprocess.Popen(
                    list(self.target.argv),
                    env=env,
                    cwd=self.target.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                    pass_fds=(write_fd,) if write_fd >= 0 else (),
                )
        except OSError:
            self._close_notify()
            raise
        finally:
            if write_fd >= 0:
                os.close(write_fd)
            if out is not None:
                os.close(out)
        self._launched_at = self.clock.now()
        self._watch_exit()
        if self._notify_fd is not None:
            os.set_blocking(self._notify_fd, False)
            asyncio.get_running_loop().add_reader(self._notify_fd, self._on_notify)
        self._arm_ready_after()
        if not self.spec.wait_ready:
            self._mark_ready()

    def _arm_ready_after(self) -> None:
        after = self.target.ready_after_s
        if after is None:
            return
        if after <= 0:
            self._ran_long_enough = True
            self._mark_ready()
            return

        def ran_long_enough() -> None:
            self._ran_long_enough = True
            self._mark_ready()

        self._ready_timer = self.clock.call_at(self._launched_at + after, ran_long_enough)

    def _watch_exit(self) -> None:
        assert self._child is not None
        loop = asyncio.get_running_loop()
        try:
            self._pidfd = os.pidfd_open(self._child.pid)
        except (AttributeError, OSError):
            # No pidfd on this kernel: a worker thread blocks in waitpid instead.
            fut = loop.run_in_executor(None, self._child.wait)
            fut.add_done_callback(lambda _: self._on_exit())
            return
        loop.add_reader(self._pidfd, self._on_exit)

    def _on_exit(self) -> None:
        assert self._child is not None
        code = self._child.poll()
        if code is None:
            return
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        # Whatever the leader left behind in its group goes with it.
        _signal_group(self._child.pid, signal.SIGKILL)
        self._drain_notify()
        self._close_notify()
        if self._ready_timer is not None:
            self._ready_timer.cancel()
        reason, detail = _describe_status(code, self.target.normal_exit_codes)
        if self.stopping:
            reason = ExitReason.SHUTDOWN
        elif not self._ran_long_enough:
            ran = self.clock.now() - self._launched_at
            reason = ExitReason.START_FAILED
            needed = self.target.ready_after_s
            detail = f"{detail} after {ran:.3g} s, before it had run {needed:g} s"
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
        if self._child is None or self.exited.done():
            return (
                self.exited.result()
                if self.exited.done()
                else Outcome(ExitReason.SHUTDOWN, "never started")
            )
        stop_signal = signal.Signals(self.target.stop_signal)
        _signal_group(self._child.pid, stop_signal)
        deadline = self.clock.now() + self.spec.shutdown_timeout_s
        if not await wait_until_done(self.exited, self.clock, deadline):  # type: ignore[arg-type]
            logger.warning(
                "child %s/%s (pid %d) ignored %s for %.1f s; sending SIGKILL",
                self.path,
                self.spec.name,
                self._child.pid,
                stop_signal.name,
                self.spec.shutdown_timeout_s,
                extra={"action": "kill_child"},
            )
            _signal_group(self._child.pid, signal.SIGKILL)
        return await asyncio.shield(self.exited)
