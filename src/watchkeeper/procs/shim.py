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

The launcher sends the run's witness key (the private half of an Ed25519 key
pair, whose public half only is in the store) on the handshake socket before
the shim reports; the shim signs the witness with it. The key is never in the
command's environment, arguments or files, and on Linux the shim makes itself
non-dumpable so the command (same user, without ``CAP_SYS_PTRACE``) cannot read
the key from its memory. A command that can (root) still cannot end a live
run with a witness: the engine believes one only once the shim and the command
have both exited.

On Linux the shim is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a
descendant whose parent exits is re-parented to the shim, not to init, even
one that left the command's group and session with ``setsid``. When the
command's leader exits (on its own, or ended by an abort), the shim ends every
descendant still there (SIGTERM, SIGKILL after a short grace), reaps them, and
records what it ended in ``containment.json``, signed like the witness, before
it writes the witness. The containment is also in ``owner.json``:
``subreaper``, or ``group`` where only the process group holds the command.

Before it starts the command the shim takes the run's start claim
(:mod:`watchkeeper.procs.start_claim`): if the engine already took the run as
never started (its launcher stalled past the grace), the command does not
start. A launcher that dies after handing over the key does not stop the run:
the shim's report then finds nobody listening, and the engine reads the owner
from ``owner.json``. One that dies before handing it over gets no run: the
shim declines in the claim, and the engine fails the run with that reason.

Only the standard library and three small sibling modules: it must start fast.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

from watchkeeper.procs import containment, identity, lease_guard, start_claim, witness

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Python ignores SIGPIPE and Python-level handlers vanish on exec; restore what a shell would.
_DEFAULT_IN_CHILD = (signal.SIGPIPE, signal.SIGXFSZ, *_FORWARDED)
_CHUNK = 65536
#: The kernel's word that the parent died; not one of the signals passed on to the command.
_PARENT_GONE = signal.SIGUSR2
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_KEY_LIMIT = 4096
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


def _receive_key(handshake_fd: int) -> tuple[str | None, lease_guard.LeaseGuard | None]:
    """The run's witness key, sent by the launcher, and the lease guard of a leased run.

    The launcher's first line is ``KEY`` or, for a run bound to a lease,
    ``KEY STOP_IN GRACE`` (:mod:`watchkeeper.procs.lease_guard`). The key is
    ``None`` when the handshake is a plain pipe (nobody can send on it): the
    witness is then unsigned, and an engine that keeps a key for the run ignores
    it. An empty key when a socket closed with nothing on it: the launcher went away.
    """
    received = b""
    try:
        while b"\n" not in received and len(received) < _KEY_LIMIT:
            if not (chunk := os.read(handshake_fd, 256)):
                break
            received += chunk
    except OSError:
        return None, None
    first, _, rest = received.partition(b"\n")
    key, *lease = first.decode("ascii", "replace").split() or [""]
    said = lease_guard.parse(" ".join(lease)) if lease else None
    return key, None if said is None else lease_guard.LeaseGuard(handshake_fd, *said, rest)


def _hide_memory() -> None:
    # The command runs as our user; a dumpable shim would let it read the key from /proc.
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


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


def _pump(read_fd: int, log_fd: int, tree: containment.Tree | None) -> None:
    # A descendant left behind holds the pipe open: with a tree to end, the leader's exit
    # (its pidfd turns readable) ends it, and only then does the pipe reach its end. What
    # is still in the pipe by then is read afterwards, so nothing written is lost.
    leader_fd = containment.pidfd(tree.leader) if tree is not None else None
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


def _tell(handshake_fd: int, said: dict[str, object], *, keep_listening: bool = False) -> None:
    """Say ``said`` to the launcher, which may have died meanwhile: the run goes on without it.

    The owner is in ``owner.json`` too, where the engine finds it. With
    ``keep_listening`` the socket stays open for the lease guard to read.
    """
    try:
        os.write(handshake_fd, json.dumps(said).encode() + b"\n")
    except OSError:
        pass  # a broken pipe: nobody is listening, and nothing more is owed to them
    finally:
        if not keep_listening:
            os.close(handshake_fd)


def _report(
    handshake_fd: int, run_dir: str, owner: dict[str, object], *, keep_listening: bool = False
) -> None:
    witness.write_json_atomic(os.path.join(run_dir, witness.OWNER_NAME), owner)
    _tell(handshake_fd, owner, keep_listening=keep_listening)


def _failed_to_start(
    run_id: str, run_dir: str, handshake_fd: int, exc: OSError, key: str | None
) -> int:
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    message = f"cannot start {exc.filename or 'the command'}: {exc.strerror}"
    witness.write(run_dir, witness.Witness(run_id, code, None, time.time(), message), key)
    _tell(handshake_fd, {"error": message})
    return code


def _orphaned_before_start(
    run_id: str, run_dir: str, handshake_fd: int, why: str, key: str | None
) -> int:
    message = f"{why} before the command started"
    # The claim says it too: no owner is ever recorded, and the engine reads the claim then.
    start_claim.take(run_dir, start_claim.declined(os.getpid(), message))
    witness.write(run_dir, witness.Witness(run_id, 125, None, time.time(), message), key)
    _tell(handshake_fd, {"error": message})
    return 125


def _claimed_by_engine(handshake_fd: int, claim: dict[str, object]) -> int:
    # The record has already ended: no witness is owed, and the command must not start.
    why = claim.get("declined") or "the engine had already decided the run's fate"
    _tell(handshake_fd, {"error": f"not started: {why}"})
    return 125


def run(
    run_id: str,
    run_dir: str,
    handshake_fd: int,
    tee: bool,
    argv: list[str],
    parent: int = 0,
    key: str | None = None,
    lease: lease_guard.LeaseGuard | None = None,
) -> int:
    """Start ``argv``, report its owner, wait for it and write the witness.

    With ``parent``, the command's group is ended when that process dies; with
    ``key``, the witness is signed with it; with ``lease``, the group is ended
    when the launcher stops renewing the run's lease. The command starts only if the shim
    takes the run's start claim before the engine does (see
    :mod:`watchkeeper.procs.start_claim`).
    """
    os.set_inheritable(handshake_fd, False)
    kind = containment.become_subreaper()
    owner_of = _Owner(parent) if parent else None
    if owner_of is not None:
        owner_of.watch()
        if owner_of.gone:
            return _orphaned_before_start(run_id, run_dir, handshake_fd, owner_of.why(), key)
    me = os.getpid()
    taken = start_claim.take(run_dir, start_claim.by_shim(me, identity.start_time(me)))
    if taken is not None:
        return _claimed_by_engine(handshake_fd, taken)
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
    owner = _owner(run_id, me, pid, kind)
    _report(handshake_fd, run_dir, owner, keep_listening=lease is not None)
    if lease is not None:
        lease.start(pid)
    tree = containment.Tree(pid) if kind == containment.SUBREAPER else None
    if tee:
        _pump(read_fd, log_fd, tree)
    code = _reap(pid, owner_of, lease, tree)
    ended = time.time()
    os.close(log_fd)
    exit_code, signum = (code, None) if code >= 0 else (None, -code)
    why = _why_ended(owner_of, lease, _how(exit_code, signum))
    containment.write(run_dir, run_id, kind, tree.record() if tree else [], key)
    witness.write(run_dir, witness.Witness(run_id, exit_code, signum, ended, why), key)
    return code if code >= 0 else 128 - code


def _owner(run_id: str, me: int, pid: int, kind: str) -> dict[str, object]:
    """The owner record the launcher is told: the shim and the command, each with its start
    time (a recycled pid never passes for them), and how the command's tree is held."""
    return {
        "run_id": run_id,
        "shim_pid": me,
        "shim_start": identity.start_time(me),
        "pid": pid,
        "pid_start": identity.start_time(pid, allow_zombie=True),
        "pgid": pid,
        "containment": kind,
    }


def _reap(
    pid: int,
    owner_of: _Owner | None,
    lease: lease_guard.LeaseGuard | None,
    tree: containment.Tree | None,
) -> int:
    """Wait for the command, end what it left behind, and reap it: its exit code
    (negative for the signal that ended it)."""
    # The leader stays unreaped until the rest is ended: its pid and group id are not reused.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    if owner_of is not None:
        owner_of.settle()
    if lease is not None:
        lease.settle()
    if tree is not None:
        tree.end()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _why_ended(
    owner_of: _Owner | None, lease: lease_guard.LeaseGuard | None, how: str
) -> str | None:
    """Why the shim ended the command, if it did: its parent went away, or its lease ran out."""
    if owner_of is not None and owner_of.gone:
        return f"{owner_of.why()}: {how}"
    if lease is not None and lease.ran_out:
        return f"{lease.why()}: {how}"
    return None


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
    key, lease = _receive_key(int(handshake))
    if key == "" or (key is not None and not witness.usable(key)):
        # Without the key the witness could not be trusted: better not to start at all.
        why = (
            "its launcher went away before handing over the run's witness key"
            if key == ""
            else "its launcher handed over a witness key it cannot sign with"
        )
        start_claim.take(run_dir, start_claim.declined(os.getpid(), why))
        return 125
    if key is not None:
        _hide_memory()
    if detach == "1" and os.fork() > 0:
        # The launcher reaps this first shim at once; the second one is nobody's child.
        os._exit(0)
    return run(run_id, run_dir, int(handshake), tee == "1", argv, int(parent), key, lease)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
