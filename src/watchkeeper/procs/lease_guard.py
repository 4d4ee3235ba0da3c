"""The shim's own watch on a leased run: stop the command when its lease is not renewed.

A runner stops a task's command before the lease it could not renew lapses,
but a runner that is frozen (SIGSTOP, a debugger, a stop-the-world pause)
does nothing at all while its lease runs out, and the server hands the task
to another runner. So the runner also tells the shim, on the handshake
socket, how long the command may run unless renewed: one line
``STOP_IN GRACE`` (seconds) with the key and one after each renewal. The shim
counts on its own monotonic clock; when a deadline passes with no newer line,
it ends the command's group (SIGTERM, SIGKILL after ``GRACE``) and says so in
the witness. The command cannot move the deadline: the socket is the shim's,
never inherited.

A line is counted from when the shim reads it, a little after the runner
sent it, so the shim's deadline is never earlier than the runner's own one.
End of file means the runner closed the socket (the task is over for it) or
died (the parent-death signal covers that): the watch ends.

Only the standard library: the shim imports it and must start fast.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time

#: The longest line the shim accepts on the lease socket.
_LINE_LIMIT = 256


def parse(line: str) -> tuple[float, float] | None:
    """``(stop_in, grace)`` from a lease line; ``None`` if it is not one."""
    parts = line.split()
    if len(parts) != 2:
        return None
    try:
        stop_in, grace = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    if not (stop_in >= 0 and grace >= 0):  # also refuses NaN
        return None
    return stop_in, grace


class LeaseGuard:
    """Watches the lease lines on ``fd`` from a thread and ends the group when they stop."""

    def __init__(self, fd: int, stop_in: float, grace: float, pending: bytes = b"") -> None:
        self.fd = fd
        self.deadline = time.monotonic() + stop_in
        self.grace = grace
        self.pending = pending
        self.ran_out = False
        self._settled = False
        self._lock = threading.Lock()
        self._pgid = 0

    def start(self, pgid: int) -> None:
        """Watch on behalf of the command's group ``pgid``."""
        self._pgid = pgid
        self._take(b"")
        threading.Thread(target=self._watch, name="lease-guard", daemon=True).start()

    def settle(self) -> None:
        """The command's leader is about to be reaped: its group id may be reused after."""
        with self._lock:
            self._settled = True

    def why(self) -> str:
        """The witness's words for a run whose lease ran out."""
        return "its lease ran out before the runner renewed it (the runner froze or was cut off)"

    def _watch(self) -> None:
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self._run_out()
                return
            try:
                readable = select.select([self.fd], [], [], left)[0]
                chunk = os.read(self.fd, _LINE_LIMIT) if readable else None
            except OSError:
                return  # the socket is gone: nothing more will come on it
            if chunk == b"":
                return  # the runner closed it (or died, which the parent-death signal covers)
            if chunk:
                self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        self.pending = self.pending[-_LINE_LIMIT:]
        for line in lines:
            said = parse(line.decode("ascii", "replace"))
            if said is not None:
                self.deadline = time.monotonic() + said[0]
                self.grace = said[1]

    def _run_out(self) -> None:
        if self._signal(signal.SIGTERM):
            time.sleep(self.grace)
            self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> bool:
        with self._lock:
            if self._settled:
                return False
            # Said before the signal: the leader may be reaped the moment it dies of it.
            self.ran_out = True
            try:
                os.killpg(self._pgid, signum)
            except ProcessLookupError:
                return False
            return True
