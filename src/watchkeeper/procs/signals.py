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
from typing import TYPE_CHECKING

from watchkeeper.procs import identity

# asyncio is imported where a coroutine needs it: `watchkeeper run` starts processes
# without an event loop, and loading asyncio was a tenth of its start-up.
if TYPE_CHECKING:
    import asyncio


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
            found = _terminate_if_ours(pid, pid_start, pgid)
            if found is not identity.Ownership.OURS:
                return found
            wait_exit(pid, pidfd, grace_s)
            if group_alive(pgid):
                _killpg(pgid, signal.SIGKILL)
                wait_exit(pid, pidfd, max(grace_s, 1.0))
    except ProcessLookupError:
        return identity.Ownership.GONE
    return identity.Ownership.OURS


async def terminate_group_async(
    pid: int, pid_start: str, pgid: int, grace_s: float
) -> identity.Ownership:
    """:func:`terminate_group` for the event loop: the grace period holds no thread.

    The same checks in the same order, with the leader pinned by its pidfd for
    the whole wait; only the waiting is awaited instead of blocked on.
    """
    try:
        with pinned(pid) as pidfd:
            found = _terminate_if_ours(pid, pid_start, pgid)
            if found is not identity.Ownership.OURS:
                return found
            await wait_exit_async(pid, pidfd, grace_s)
            if group_alive(pgid):
                _killpg(pgid, signal.SIGKILL)
                await wait_exit_async(pid, pidfd, max(grace_s, 1.0))
    except ProcessLookupError:
        return identity.Ownership.GONE
    return identity.Ownership.OURS


def _terminate_if_ours(pid: int, pid_start: str, pgid: int) -> identity.Ownership:
    """SIGTERM the group if its leader (already pinned) is the one recorded; else say why not."""
    now_start = identity.start_time(pid, allow_zombie=True)
    if now_start != pid_start:
        return identity.Ownership.GONE if now_start is None else identity.Ownership.RECYCLED
    _killpg(pgid, signal.SIGTERM)
    return identity.Ownership.OURS


async def wait_exit_async(pid: int, pidfd: int | None, timeout_s: float) -> bool:
    """:func:`wait_exit` on the event loop; ``True`` if ``pid`` exited in time."""
    import asyncio

    if pidfd is not None:
        return await readable(pidfd, timeout_s)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while identity.start_time(pid) is not None:
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def readable(fd: int, timeout_s: float) -> bool:
    """Wait on the event loop until ``fd`` is readable (``True``) or ``timeout_s`` passed."""
    import asyncio

    if select.select([fd], [], [], 0)[0]:
        return True
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, timeout_s)):
                await ready
    finally:
        loop.remove_reader(fd)
    return ready.done() and not ready.cancelled()


def _killpg(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group already left
        os.killpg(pgid, signum)
