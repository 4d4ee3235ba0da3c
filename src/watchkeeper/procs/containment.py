"""Holding a run's whole process tree: the shim as child subreaper, and what it ended.

On Linux the shim is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a
descendant whose parent exits is re-parented to the shim, not to init, even one
that left the command's group and session with ``setsid``. When the command's
leader exits, :class:`Tree` ends every descendant still there and the shim
records what it ended in ``containment.json``, signed like the witness.

Only the standard library and a sibling module: the shim imports it and must start fast.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from watchkeeper.procs import witness

_PR_SET_CHILD_SUBREAPER = 36
#: How long descendants left behind by the leader get after SIGTERM before SIGKILL; well
#: under the time an abort waits for the witness, which is written only after them.
DESCENDANT_GRACE_S = 2.0
CONTAINMENT_NAME = "containment.json"
SUBREAPER = "subreaper"
GROUP = "group"


def become_subreaper() -> str:
    """Hold every descendant under the shim where the kernel allows it; the containment kind."""
    if not sys.platform.startswith("linux"):
        return GROUP
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return GROUP
    return SUBREAPER


def _stat(pid: str) -> tuple[str, int, str, bool] | None:
    """Name, parent, start time and whether it is a zombie; ``None`` once gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            raw = file.read()
    except OSError:
        return None
    # The name may hold spaces and parentheses: the fields after it follow the last ")".
    close = raw.rfind(b")")
    fields = raw[close + 2 :].split()
    name = raw[raw.find(b"(") + 1 : close].decode("utf-8", "replace")
    return name, int(fields[1]), fields[19].decode(), fields[0] in (b"Z", b"X")


class Tree:
    """The shim's descendants other than the command's leader, and what was done to them."""

    def __init__(self, leader: int) -> None:
        self.leader = leader
        self.me = os.getpid()
        self.ended: dict[int, dict[str, object]] = {}

    def end(self) -> None:
        """SIGTERM every descendant, SIGKILL what is left after the grace, reap them all.

        Called once the leader has exited and before it is reaped, so its pid
        cannot be reused meanwhile. A descendant that forks while being ended is
        found by the next look and killed too.
        """
        found = self._look()
        if not found:
            return
        self._send(found, signal.SIGTERM)
        deadline = time.monotonic() + DESCENDANT_GRACE_S
        while found and time.monotonic() < deadline:
            time.sleep(0.02)
            found = self._look()
        while found:
            self._send(found, signal.SIGKILL)
            time.sleep(0.01)
            found = self._look()

    def record(self) -> list[dict[str, object]]:
        """What was ended, in the order it was found."""
        return list(self.ended.values())

    def _look(self) -> dict[int, tuple[str, str]]:
        """Reap exited children, then the live descendants: pid to (name, start time)."""
        children: dict[int, list[int]] = {}
        live: dict[int, tuple[str, str]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or (stat := _stat(entry)) is None:
                continue
            name, parent, start, zombie = stat
            pid = int(entry)
            children.setdefault(parent, []).append(pid)
            if zombie:
                if parent == self.me and pid != self.leader:
                    _reap(pid)
                continue
            live[pid] = (name, start)
        under: dict[int, tuple[str, str]] = {}
        to_visit = [pid for pid in children.get(self.me, []) if pid != self.leader]
        while to_visit:
            pid = to_visit.pop()
            if pid in live and pid not in under:
                under[pid] = live[pid]
                to_visit.extend(children.get(pid, []))
        return under

    def _send(self, found: dict[int, tuple[str, str]], signum: signal.Signals) -> None:
        for pid, (name, start) in found.items():
            if _signal_if_same(pid, start, signum):
                entry = self.ended.setdefault(pid, {"pid": pid, "name": name})
                entry["signal"] = signum.name


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return  # reaped already


def _signal_if_same(pid: int, start: str, signum: int) -> bool:
    """Signal ``pid`` only while it is the process that was looked at (its pid pinned)."""
    fd = pidfd(pid)
    try:
        stat = _stat(str(pid))
        if stat is None or stat[2] != start or stat[3]:
            return False
        if fd is None:
            os.kill(pid, signum)  # a kernel without pidfds: checked just before, not pinned
        else:
            signal.pidfd_send_signal(fd, signum)
        return True
    except ProcessLookupError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def pidfd(pid: int) -> int | None:
    """A descriptor pinning ``pid``; ``None`` if it is gone or the kernel has no pidfds."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _message(record: dict[str, object]) -> bytes:
    return json.dumps(record, sort_keys=True).encode()


def write(
    run_dir: str, run_id: str, kind: str, ended: list[dict[str, object]], key: str | None
) -> None:
    """Record how the run was held and what was ended after its leader, signed with ``key``."""
    record: dict[str, object] = {"run_id": run_id, "containment": kind, "ended": ended}
    if key:
        record[witness.SIGNATURE] = witness.sign(key, _message(record))
    witness.write_json_atomic(os.path.join(run_dir, CONTAINMENT_NAME), record)


def read(run_dir: str, run_id: str, key: str | None) -> dict[str, object] | None:
    """The run's containment record; ``None`` if absent, unreadable or not signed by its shim."""
    try:
        with open(os.path.join(run_dir, CONTAINMENT_NAME), "rb") as file:
            record = json.loads(file.read())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or record.get("run_id") != run_id:
        return None
    given = record.pop(witness.SIGNATURE, None)
    if key and not witness.verify(key, _message(record), given):
        return None
    return record
