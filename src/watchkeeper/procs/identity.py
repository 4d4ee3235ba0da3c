"""Who owns a process: host, boot id, pid and the process's start time.

Which engine settles a run is another question: the one on the run's host
whose data folder holds the run's files (:func:`engine_key`).

A pid alone is not an identity: the kernel recycles pids. A pid is ours only
when the process that has it now started at the recorded time, on this host,
since the recorded boot. Start times are opaque strings: ``t<ticks>`` from
``/proc/PID/stat`` field 22 on Linux, ``c<seconds>`` from psutil elsewhere.
Both sides of a comparison are always read on the same host the same way.
"""

from __future__ import annotations

import os
from enum import StrEnum
from functools import cache

from watchkeeper.errors import WatchkeeperError

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


class Ownership(StrEnum):
    """What a recorded (pid, start time) is to us now."""

    OURS = "ours"  # the same process, alive
    GONE = "gone"  # no such process (or only its zombie)
    RECYCLED = "recycled"  # the pid belongs to another process now
    UNKNOWN = "unknown"  # another host, no owner recorded, or its /proc entry hidden from us


@cache
def host() -> str:
    """This host's name, as recorded on runs."""
    import socket  # imported here: the shim never needs it and must start fast

    return socket.gethostname()


def engine_key(data_dir: str | os.PathLike[str]) -> str:
    """The engine of ``data_dir`` on this host, as its runs record it: ``<host>:<folder>``.

    Two engines on one host with different data folders must never settle each
    other's runs: a run's witness and owner file are only in the folder of the
    engine that started it. The folder is resolved, so two spellings of one
    folder are one engine.
    """
    return f"{host()}:{os.path.realpath(data_dir)}"


@cache
def boot_id() -> str | None:
    """The kernel's boot id, or ``None`` where there is none (not Linux)."""
    try:
        with open(BOOT_ID_PATH, encoding="ascii") as file:
            return file.read().strip() or None
    except OSError:
        return None


def user() -> str:
    """The user running this process."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


class Hidden(WatchkeeperError):
    """The process may exist, but this process may not read its entry (``hidepid``, permissions)."""


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` after the command name; ``None`` when there is no such process.

    Raises :class:`Hidden` when the entry exists but is not ours to read, or
    ``/proc`` does not show it while the process is there (``hidepid``).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            raw = file.read().decode("ascii", "replace")
    except PermissionError as exc:
        raise Hidden(pid) from exc
    except (FileNotFoundError, ProcessLookupError):
        _gone_or_hidden(pid)
        return None
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    return raw[raw.rfind(")") + 2 :].split()


def _gone_or_hidden(pid: int) -> None:
    # A /proc mounted hidepid=invisible shows other users' processes as missing: ask the
    # kernel itself whether the pid is taken (signal 0 sends nothing).
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    except PermissionError as exc:
        raise Hidden(pid) from exc
    raise Hidden(pid)


def start_time(pid: int, *, allow_zombie: bool = False) -> str | None:
    """The start time of process ``pid``, or ``None`` if it is gone or cannot be read.

    A zombie counts as gone unless ``allow_zombie``: its parent may read the
    start time of a child it has not reaped yet (the shim does, for a command
    that exited at once). Where "cannot read" must not pass for "gone", use
    :func:`read_start_time` (or :func:`ownership`, which does).
    """
    try:
        return read_start_time(pid, allow_zombie=allow_zombie)
    except Hidden:
        return None


def read_start_time(pid: int, *, allow_zombie: bool = False) -> str | None:
    """:func:`start_time`, raising :class:`Hidden` where the process may live unseen."""
    if os.path.isdir("/proc/self"):
        fields = _stat_fields(pid)
        # fields[0] is field 3 (state); field 22 (starttime) is fields[19].
        if fields is None or len(fields) < 20:
            return None
        if fields[0] in ("Z", "X") and not allow_zombie:
            return None
        return f"t{fields[19]}"
    return _psutil_start(pid, allow_zombie)


def _psutil_start(pid: int, allow_zombie: bool) -> str | None:
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE and not allow_zombie:
            return None
        return f"c{process.create_time():.2f}"
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied as exc:
        raise Hidden(pid) from exc


def ownership(
    run_host: str, run_boot_id: str | None, pid: int | None, recorded_start: str | None
) -> Ownership:
    """Whether the process recorded as (``pid``, ``recorded_start``) is still ours."""
    if run_host != host():
        return Ownership.UNKNOWN
    if run_boot_id is not None and boot_id() is not None and run_boot_id != boot_id():
        return Ownership.GONE  # a record from before a reboot: nothing of it survives
    if pid is None or recorded_start is None:
        return Ownership.UNKNOWN
    try:
        current = read_start_time(pid)
    except Hidden:
        return Ownership.UNKNOWN  # unknown is not dead: never reclaim what we cannot see
    if current is None:
        return Ownership.GONE
    return Ownership.OURS if current == recorded_start else Ownership.RECYCLED


def alive(ownership_now: Ownership) -> bool | None:
    """Liveness as the read model speaks it: ``None`` means cannot tell."""
    if ownership_now is Ownership.OURS:
        return True
    if ownership_now is Ownership.UNKNOWN:
        return None
    return False
