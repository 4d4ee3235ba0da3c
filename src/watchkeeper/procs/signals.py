"""Signal a run's process group only while its leader is provably ours.

With ``os.pidfd_open`` the leader is pinned by a file descriptor opened
*before* its start time is checked: the kernel cannot give that pid to another
process while we hold the descriptor, so neither the check, the signals nor
the wait can race with pid reuse. Without pidfds (not Linux) the start time is
checked again before each signal.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterator

from watchkeeper.procs import identity


@contextlib.contextmanager
def pinned(pid: int) -> Iterator[int | None]:
    """A pidfd for ``pid`` (``None`` where pidfds do not exist); ``ProcessLookupError`` if gone."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        yield None
        return
    fd = opener(pid)
    try:
        yield fd
    finally:
        os.close(fd)


def wait_exit(pid: int, pidfd: int | None, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for ``pid`` to exit (or become a zombie); ``True`` if it did."""
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout_s * 1000))))
    deadline = time.monotonic() + timeout_s
    while identity.start_time(pid) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def group_alive(pgid: int) -> bool:
    """Whether any process is left in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def terminate_group(pid: int, pid_start: str, pgid: int, grace_s: float) -> identity.Ownership:
    """SIGTERM the group, SIGKILL what is left after ``grace_s``.

    Returns ``OURS`` when the group was signalled, ``GONE`` or ``RECYCLED``
    when nothing was. The leader's identity is checked with its pidfd held (a
    zombie leader still counts: its parent has not reaped it yet); while the
    leader or any member exists, the group id cannot be handed to another group.
    """
    try:
        with pinned(pid) as pidfd:
            now_start = identity.start_time(pid, allow_zombie=True)
            if now_start != pid_start:
                return identity.Ownership.GONE if now_start is None else identity.Ownership.RECYCLED
            _killpg(pgid, signal.SIGTERM)
            wait_exit(pid, pidfd, grace_s)
            if group_alive(pgid):
                _killpg(pgid, signal.SIGKILL)
                wait_exit(pid, pidfd, max(grace_s, 1.0))
    except ProcessLookupError:
        return identity.Ownership.GONE
    return identity.Ownership.OURS


def _killpg(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group already left
        os.killpg(pgid, signum)
