"""The shim: owns one command, holds its log, and writes its witness on exit.

``python -m watchkeeper.procs.shim RUN_ID RUN_DIR HANDSHAKE_FD DETACH TEE PARENT -- CMD...``

The command starts in a process group of its own (so an abort reaches its
children too) with ``WATCHKEEPER_RUN_ID`` in its environment and stdin on
``/dev/null``. Detached, the shim also forks once more after its parent put it
in a new session, so the launcher can reap it at once and nothing of the run
is a child of the caller. It reports the owner (its pid, the command's pid,
their start times) on the handshake pipe and in ``owner.json``, waits for the
command, and records how it ended in ``witness.json``. Signals sent to the
shim are passed on to the command's group.

With a ``PARENT`` pid (not ``0``), the run belongs to that process (a runner's
task): on Linux the kernel tells the shim when its parent dies
(``PR_SET_PDEATHSIG``), and the shim then ends the command's group (SIGTERM,
SIGKILL after a grace period) and says so in the witness. Otherwise a runner
killed mid-task would leave its command running while the task is leased and
run again elsewhere.

The launcher sends the run's witness key on the handshake socket before the
shim reports; the shim signs the witness with it. The key is never in the
command's environment, arguments or files, and on Linux the shim makes itself
non-dumpable so the command (same user) cannot read the key from its memory.

On Linux the shim is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a
descendant whose parent exits is re-parented to the shim, not to init, even
one that left the command's group and session with ``setsid``. When the
command's leader exits (on its own, or ended by an abort), the shim ends every
descendant still there (SIGTERM, SIGKILL after a short grace), reaps them, and
records what it ended in ``containment.json``, signed like the witness, before
it writes the witness. The containment is also in ``owner.json``:
``subreaper``, or ``group`` where only the process group holds the command.

Only the standard library and two small sibling modules: it must start fast.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import select
import signal
import sys
import time

from watchkeeper.procs import identity, witness

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Python ignores SIGPIPE and Python-level handlers vanish on exec; restore what a shell would.
_DEFAULT_IN_CHILD = (signal.SIGPIPE, signal.SIGXFSZ, *_FORWARDED)
_CHUNK = 65536
#: The kernel's word that the parent died; not one of the signals passed on to the command.
_PARENT_GONE = signal.SIGUSR2
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_KEY_LIMIT = 4096
#: How long descendants left behind by the leader get after SIGTERM before SIGKILL; well
#: under the time an abort waits for the witness, which is written only after them.
DESCENDANT_GRACE_S = 2.0
CONTAINMENT_NAME = "containment.json"
SUBREAPER = "subreaper"
GROUP = "group"
#: How long an orphaned command gets after SIGTERM before its group is killed.
ORPHAN_GRACE_S = 5.0


class _Owner:
    """Whose death ends the run, and the command's group once it exists."""

    def __init__(self, parent: int) -> None:
        self.parent = parent
        self.pgid = 0
        self.gone = False

    def watch(self) -> None:
        """Ask to be told when the parent dies, then look whether it already has."""
        signal.signal(_PARENT_GONE, self._on_signal)
        _ask_parent_death_signal(_PARENT_GONE)
        # The parent may have died before the request: the kernel would never say so.
        if os.getppid() != self.parent:
            self._parent_went()

    def started(self, pgid: int) -> None:
        """The command's group exists; end it at once if the parent went meanwhile."""
        self.pgid = pgid
        if self.gone:
            self._stop_group()

    def settle(self) -> None:
        """The command has exited (not yet reaped): kill what is left of an orphaned group.

        The unreaped leader keeps its group id from being given to anybody else.
        """
        if self.gone:
            signal.setitimer(signal.ITIMER_REAL, 0)
            _killpg(self.pgid, signal.SIGKILL)
        self.pgid = 0  # once reaped, the group id may be anybody's: never signal it again

    def why(self) -> str:
        """The witness's words for an orphaned run."""
        return f"the process that started it (pid {self.parent}) went away"

    def _on_signal(self, _signum: int, _frame: object) -> None:
        # Also sent when the thread that started us ends while the process lives on.
        if os.getppid() != self.parent:
            self._parent_went()

    def _parent_went(self) -> None:
        if self.gone:
            return
        self.gone = True
        if self.pgid:
            self._stop_group()

    def _stop_group(self) -> None:
        _killpg(self.pgid, signal.SIGTERM)
        signal.signal(signal.SIGALRM, lambda _s, _f: _killpg(self.pgid, signal.SIGKILL))
        signal.setitimer(signal.ITIMER_REAL, ORPHAN_GRACE_S)


def _ask_parent_death_signal(signum: int) -> None:
    if not sys.platform.startswith("linux"):
        return  # no such request elsewhere; the getppid() check still catches a dead parent
    import ctypes  # only runs that die with their parent pay for it

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def _receive_key(handshake_fd: int) -> str | None:
    """The run's witness key, sent by the launcher, which then shuts its side for writing.

    ``None`` when the handshake is a plain pipe (nobody can send on it): the
    witness is then unsigned, and an engine that keeps a key for the run ignores it.
    """
    received = b""
    try:
        while len(received) < _KEY_LIMIT and (chunk := os.read(handshake_fd, 256)):
            received += chunk
    except OSError:
        return None
    return received.decode("ascii", "replace").strip() or None


def _hide_memory() -> None:
    # The command runs as our user; a dumpable shim would let it read the key from /proc.
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _become_subreaper() -> str:
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


class _Tree:
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
    fd = _pidfd(pid)
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


def _pidfd(pid: int) -> int | None:
    """A descriptor pinning ``pid``; ``None`` if it is gone or the kernel has no pidfds."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _containment_signature(key: str, record: dict[str, object]) -> str:
    message = json.dumps(record, sort_keys=True).encode()
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def write_containment(
    run_dir: str, run_id: str, kind: str, ended: list[dict[str, object]], key: str | None
) -> None:
    """Record how the run was held and what was ended after its leader, signed with ``key``."""
    record: dict[str, object] = {"run_id": run_id, "containment": kind, "ended": ended}
    if key:
        record[witness.SIGNATURE] = _containment_signature(key, record)
    witness.write_json_atomic(os.path.join(run_dir, CONTAINMENT_NAME), record)


def read_containment(run_dir: str, run_id: str, key: str | None) -> dict[str, object] | None:
    """The run's containment record; ``None`` if absent, unreadable or not signed by its shim."""
    try:
        with open(os.path.join(run_dir, CONTAINMENT_NAME), "rb") as file:
            record = json.loads(file.read())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or record.get("run_id") != run_id:
        return None
    given = record.pop(witness.SIGNATURE, None)
    if key and not (
        isinstance(given, str) and hmac.compare_digest(given, _containment_signature(key, record))
    ):
        return None
    return record


def _killpg(pgid: int, signum: int) -> None:
    if pgid <= 0:
        return  # 0 would be the shim's own group: there is no command group to signal
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return  # the whole group has already gone


def _spawn(argv: list[str], out_fd: int) -> int:
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out_fd, 1),
        (os.POSIX_SPAWN_DUP2, out_fd, 2),
    ]
    return os.posix_spawnp(
        argv[0], argv, os.environ, file_actions=actions, setpgroup=0, setsigdef=_DEFAULT_IN_CHILD
    )


def _forward_signals(pgid: int) -> None:
    def forward(signum: int, _frame: object) -> None:
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            return  # the group has already gone; the wait below will say how

    for signum in _FORWARDED:
        signal.signal(signum, forward)


def _pump(read_fd: int, log_fd: int, tree: _Tree | None) -> None:
    # A descendant left behind holds the pipe open: with a tree to end, the leader's exit
    # (its pidfd turns readable) ends it, and only then does the pipe reach its end. What
    # is still in the pipe by then is read afterwards, so nothing written is lost.
    leader_fd = _pidfd(tree.leader) if tree is not None else None
    while True:
        if (
            tree is not None
            and leader_fd is not None
            and leader_fd in select.select([read_fd, leader_fd], [], [])[0]
        ):
            os.close(leader_fd)
            leader_fd = None
            tree.end()
            continue
        if not (chunk := os.read(read_fd, _CHUNK)):
            break
        os.write(log_fd, chunk)
        try:
            os.write(1, chunk)
        except OSError:
            continue  # the terminal went away; the log still gets everything
    if leader_fd is not None:
        os.close(leader_fd)
    os.close(read_fd)


def _report(handshake_fd: int, run_dir: str, owner: dict[str, object]) -> None:
    witness.write_json_atomic(os.path.join(run_dir, witness.OWNER_NAME), owner)
    os.write(handshake_fd, json.dumps(owner).encode() + b"\n")
    os.close(handshake_fd)


def _failed_to_start(
    run_id: str, run_dir: str, handshake_fd: int, exc: OSError, key: str | None
) -> int:
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    message = f"cannot start {exc.filename or 'the command'}: {exc.strerror}"
    witness.write(run_dir, witness.Witness(run_id, code, None, time.time(), message), key)
    os.write(handshake_fd, json.dumps({"error": message}).encode() + b"\n")
    os.close(handshake_fd)
    return code


def _orphaned_before_start(
    run_id: str, run_dir: str, handshake_fd: int, why: str, key: str | None
) -> int:
    message = f"{why} before the command started"
    witness.write(run_dir, witness.Witness(run_id, 125, None, time.time(), message), key)
    os.write(handshake_fd, json.dumps({"error": message}).encode() + b"\n")
    os.close(handshake_fd)
    return 125


def run(
    run_id: str,
    run_dir: str,
    handshake_fd: int,
    tee: bool,
    argv: list[str],
    parent: int = 0,
    key: str | None = None,
) -> int:
    """Start ``argv``, report its owner, wait for it and write the witness.

    With ``parent``, the command's group is ended when that process dies; with
    ``key``, the witness is signed with it.
    """
    os.set_inheritable(handshake_fd, False)
    kind = _become_subreaper()
    owner_of = _Owner(parent) if parent else None
    if owner_of is not None:
        owner_of.watch()
        if owner_of.gone:
            return _orphaned_before_start(run_id, run_dir, handshake_fd, owner_of.why(), key)
    log_fd = os.open(
        os.path.join(run_dir, witness.LOG_NAME), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
    )
    read_fd, out_fd = os.pipe() if tee else (-1, log_fd)
    try:
        pid = _spawn(argv, out_fd)
    except OSError as exc:
        return _failed_to_start(run_id, run_dir, handshake_fd, exc, key)
    finally:
        if tee:
            os.close(out_fd)
    _forward_signals(pid)
    if owner_of is not None:
        owner_of.started(pid)
    me = os.getpid()
    owner = {
        "run_id": run_id,
        "shim_pid": me,
        "shim_start": identity.start_time(me),
        "pid": pid,
        "pid_start": identity.start_time(pid, allow_zombie=True),
        "pgid": pid,
        "containment": kind,
    }
    _report(handshake_fd, run_dir, owner)
    tree = _Tree(pid) if kind == SUBREAPER else None
    if tee:
        _pump(read_fd, log_fd, tree)
    # The leader stays unreaped until the rest is ended: its pid and group id are not reused.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    if owner_of is not None:
        owner_of.settle()
    if tree is not None:
        tree.end()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    ended = time.time()
    os.close(log_fd)
    exit_code, signum = (code, None) if code >= 0 else (None, -code)
    why = f"{owner_of.why()}: {_how(exit_code, signum)}" if owner_of and owner_of.gone else None
    write_containment(run_dir, run_id, kind, tree.record() if tree else [], key)
    witness.write(run_dir, witness.Witness(run_id, exit_code, signum, ended, why), key)
    return code if code >= 0 else 128 - code


def _how(exit_code: int | None, signum: int | None) -> str:
    if signum is None:
        return f"exited with status {exit_code}"
    try:
        return f"killed by signal {signum} ({signal.Signals(signum).name})"
    except ValueError:
        return f"killed by signal {signum}"


def main(args: list[str]) -> int:
    """Entry point; arguments as in the module docstring."""
    run_id, run_dir, handshake, detach, tee, parent, sep, *argv = args
    if sep != "--" or not argv:
        sys.stderr.write("usage: shim RUN_ID RUN_DIR HANDSHAKE_FD DETACH TEE PARENT -- CMD...\n")
        return 2
    key = _receive_key(int(handshake))
    if key is not None:
        _hide_memory()
    if detach == "1" and os.fork() > 0:
        # The launcher reaps this first shim at once; the second one is nobody's child.
        os._exit(0)
    return run(run_id, run_dir, int(handshake), tee == "1", argv, int(parent), key)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
