"""The runner's own environment: its token leaves it once read.

A task runs as the runner's user, and ``/proc/<pid>/environ`` shows a
process's *initial* environment: the bytes the kernel laid out on its stack at
``exec``, whatever the process did to ``os.environ`` since. So when the runner
took its token from ``WATCHKEEPER_TOKEN``, a task could read it there. Once it
is read, :func:`forget_token`:

- drops it from ``os.environ`` (which unsets it in libc's environment too), so
  nothing the runner starts inherits it;
- overwrites it with zeros in that initial block, found through the bounds the
  kernel gives in ``/proc/self/stat`` (``env_start``, ``env_end``), so
  ``/proc/<pid>/environ`` no longer holds it, for any reader, root included;
- makes the runner non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``), so a process
  of its user without ``CAP_SYS_PTRACE`` can read neither that file (nor the
  rest of the runner's environment) nor its memory, where the token lives on in
  the client that uses it.

What it cannot do: a task running as root (or with ``CAP_SYS_PTRACE``) may
still read the runner's memory. Linux only; elsewhere nothing is changed but
``os.environ``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger(__name__)
_PR_SET_DUMPABLE = 4
# Fields 50 and 51 of /proc/PID/stat (since Linux 3.5), counted after the command name.
_ENV_START, _ENV_END = 50 - 3, 51 - 3


def forget_token(name: str) -> str | None:
    """Take ``name`` out of this process's environment for good; its value, if it was set."""
    value = os.environ.pop(name, None)
    if sys.platform.startswith("linux"):
        _wipe_initial(name)
        _undumpable()
    return value


def _wipe_initial(name: str) -> None:
    bounds = _environ_bounds()
    if bounds is None:
        return
    start, end = bounds
    block = ctypes.string_at(start, end - start)
    prefix = name.encode() + b"="
    offset = 0
    for entry in block.split(b"\0"):
        if entry.startswith(prefix):
            # Safe to overwrite: libc no longer points at it once the variable was unset.
            ctypes.memset(start + offset, 0, len(entry))
        offset += len(entry) + 1


def _environ_bounds() -> tuple[int, int] | None:
    """Where the kernel put this process's initial environment; ``None`` if it will not say."""
    try:
        with open("/proc/self/stat", "rb") as file:
            raw = file.read()
        fields = raw[raw.rfind(b")") + 2 :].split()
        start, end = int(fields[_ENV_START]), int(fields[_ENV_END])
    except (OSError, IndexError, ValueError):
        start = end = 0
    if not 0 < start < end:
        log.warning(
            "Could not find this process's initial environment: its token stays readable in "
            "/proc/%s/environ to processes that may read that file",
            os.getpid(),
            extra={"action": "runner_token"},
        )
        return None
    return start, end


def _undumpable() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log.warning(
            "Could not make the runner non-dumpable (errno %s): processes of its user may read "
            "its memory",
            ctypes.get_errno(),
            extra={"action": "runner_token"},
        )
