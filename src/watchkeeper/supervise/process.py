"""Subprocess children: own session, exit noticed through a pidfd, group-wide stop.

The supervisor learns of an exit when the child's pidfd becomes readable on
the event loop, so nothing polls. Stopping sends SIGTERM to the whole process
group, then SIGKILL after the shutdown timeout; whatever the leader leaves in
its group when it exits is killed with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess

from watchkeeper.supervise.children import HeartbeatHook, Outcome, Runner
from watchkeeper.supervise.clock import Clock, wait_until_done
from watchkeeper.supervise.events import ExitReason
from watchkeeper.supervise.spec import ChildSpec, ProcessTarget

logger = logging.getLogger(__name__)

NOTIFY_FD_ENV = "WATCHKEEPER_NOTIFY_FD"


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
