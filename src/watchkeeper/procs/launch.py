"""Register, then start: the run record is committed before the command exists.

A crash before the write leaves nothing running; a crash after it leaves a
``starting`` record (and, once the shim is up, its ``owner.json``) that the
reaper can judge.

Each run gets a witness key pair: the private half goes to the shim on the
handshake socket (never through the command's environment, arguments or
files), the public half into its record. The shim signs the witness with it,
so one the command writes for itself is told apart, even by a command that
reads the store.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.clock import Now
from watchkeeper.errors import InvalidInput
from watchkeeper.procs import identity, layout, witness
from watchkeeper.procs.errors import LaunchFailed
from watchkeeper.records.procs import NewProc, ProcRun, ProcStatus, Started

if TYPE_CHECKING:
    from watchkeeper.procs.moves import RunMoves

log = logging.getLogger(__name__)
RUN_ID_ENV = "WATCHKEEPER_RUN_ID"
#: Told of a run once it is recorded, before its command starts; raising stops the start.
Announce = Callable[[ProcRun], None]


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """What to run and how: the options of ``watchkeeper run``."""

    argv: tuple[str, ...]
    cwd: str = field(default_factory=os.getcwd)
    name: str | None = None
    detach: bool = False
    budget_s: float | None = None
    timeout_s: float | None = None
    origin: dict[str, str] | None = None
    session: str | None = None
    on_done_cmd: str | None = None
    on_done_url: str | None = None
    # The command's whole environment (default: this process's). Never recorded: it may
    # hold a secret, such as a queue task's own token.
    env: Mapping[str, str] | None = field(default=None, repr=False)
    # The command's group ends when the launching process dies (a runner's task, which the
    # server leases again): Linux tells the shim when the thread that started it exits, so
    # launch from a thread that lives as long as the process.
    die_with_parent: bool = False
    #: ``(stop_in, grace)`` in seconds: the shim ends the command's group unless the launcher
    #: renews within ``stop_in`` through :attr:`Launched.lease` (a runner's leased task).
    lease: tuple[float, float] | None = None


class LeaseLine:
    """The launcher's end of a leased run's handshake: how it renews the shim's deadline."""

    def __init__(self, handshake: socket.socket) -> None:
        self._handshake = handshake

    def renew(self, stop_in: float, grace: float) -> bool:
        """Let the command run ``stop_in`` more seconds; ``False`` if the shim is gone."""
        try:
            self._handshake.sendall(_lease_line(stop_in, grace) + b"\n")
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Stop renewing for good; the shim's watch ends, the command runs on."""
        self._handshake.close()


def _lease_line(stop_in: float, grace: float) -> bytes:
    return f"{max(0.0, stop_in):.3f} {max(0.0, grace):.3f}".encode()


@dataclass
class Launched:
    """A started run; ``shim`` is set for a foreground run the caller waits on."""

    run: ProcRun
    shim: subprocess.Popen[bytes] | None = None
    #: Set for a run started with :attr:`LaunchRequest.lease`.
    lease: LeaseLine | None = None


def wait_foreground(launched: Launched) -> None:
    """Wait until a foreground run's shim exits; Ctrl-C reaches the command through it."""
    if launched.shim is None:
        return
    while True:
        try:
            launched.shim.wait()
            return
        except KeyboardInterrupt:
            continue  # the shim passes the interrupt on to the command's group


def new_run_id() -> str:
    """A fresh run id: short, unguessable, safe in paths and URLs."""
    return f"p-{secrets.token_hex(6)}"


def check(request: LaunchRequest) -> None:
    """Refuse what cannot start, before anything is recorded."""
    if not request.argv or not request.argv[0]:
        raise InvalidInput("no command given: write it after `--`", "argv")
    if not Path(request.cwd).is_dir():
        raise InvalidInput(f"working folder {request.cwd} does not exist", "cwd")
    program = request.argv[0]
    if "/" in program:
        found = Path(request.cwd, program)
        if not (found.is_file() and os.access(found, os.X_OK)):
            raise InvalidInput(f"command {program!r} is not an executable file", "argv")
    elif shutil.which(program) is None:
        raise InvalidInput(f"command {program!r} not found on PATH", "argv")
    if request.timeout_s is not None and request.timeout_s <= 0:
        raise InvalidInput("--timeout must be more than 0", "timeout_s")
    if request.budget_s is not None and request.budget_s <= 0:
        raise InvalidInput("--budget must be more than 0", "budget_s")
    if request.detach and request.lease is not None:
        raise InvalidInput(
            "a detached run outlives whoever started it; it cannot be bound to a lease", "detach"
        )
    if request.detach and request.die_with_parent:
        raise InvalidInput(
            "a detached run outlives whoever started it; it cannot also die with its parent: "
            "choose one",
            "detach",
        )


def _make_run_dir(data_dir: Path, run_id: str) -> Path:
    folder = layout.run_dir(data_dir, run_id)
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        raise LaunchFailed(
            f"cannot create {folder}: {exc.strerror}; choose a writable data_dir"
        ) from None
    return folder


@dataclass(frozen=True, slots=True)
class Recorded:
    """A run committed as ``starting``, its folder made, and the key its shim will sign with."""

    new: NewProc
    folder: Path
    key: str = field(repr=False)
    request: LaunchRequest


def launch(
    procs: RunMoves,
    data_dir: Path,
    request: LaunchRequest,
    clock: Now,
    *,
    tee: bool = False,
    announce: Announce | None = None,
) -> Launched:
    """Record the run, then start its shim; detached runs return once the command runs.

    ``announce`` is told of the recorded run before anything starts (a server that
    must record it too); if it raises, the run fails with the reason and never starts.
    """
    recorded = _record(procs, data_dir, request, clock)
    if announce is not None:
        try:
            announce(procs.get(recorded.new.run_id))
        except BaseException as exc:
            _fail(procs, recorded.new.run_id, f"not started: {exc}", clock)
            raise
    return _start_recorded(procs, recorded, clock, tee=tee)


def _record(procs: RunMoves, data_dir: Path, request: LaunchRequest, clock: Now) -> Recorded:
    """Check ``request`` and commit its run as ``starting``; nothing runs yet."""
    check(request)
    run_id = new_run_id()
    folder = _make_run_dir(data_dir, run_id)
    new = NewProc(
        run_id=run_id,
        name=request.name or Path(request.argv[0]).name,
        argv=request.argv,
        cwd=str(Path(request.cwd).resolve()),
        host=identity.host(),
        user=identity.user(),
        boot_id=identity.boot_id(),
        detach=request.detach,
        budget_s=request.budget_s,
        timeout_s=request.timeout_s,
        origin=request.origin,
        session=request.session,
        on_done_cmd=request.on_done_cmd,
        on_done_url=request.on_done_url,
    )
    key, public = witness.new_key_pair()
    try:
        procs.register(new, clock(), engine_key=identity.engine_key(data_dir), witness_key=public)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # nothing recorded: leave nothing behind
        raise
    return Recorded(new, folder, key, request)


def _start_recorded(
    procs: RunMoves, recorded: Recorded, clock: Now, *, tee: bool = False
) -> Launched:
    """Start the shim of a recorded run and record the owner it reports.

    :class:`LaunchFailed` if the shim refuses: among other reasons, because the
    engine already took the run as never started (its launcher stalled).
    """
    request = recorded.request
    parent = os.getpid() if request.die_with_parent else 0
    try:
        shim, handshake = spawn_shim(recorded, tee=tee, parent=parent)
    except OSError as exc:
        _fail(procs, recorded.new.run_id, f"cannot start the shim: {exc.strerror}", clock)
        raise LaunchFailed(f"cannot start the shim: {exc.strerror}", recorded.new.run_id) from None
    with handshake.makefile("rb") as report:
        line = report.readline()
    lease = LeaseLine(handshake) if request.lease is not None else None
    if lease is None:
        handshake.close()
    try:
        _record_handshake(procs, recorded.new.run_id, line, shim, clock)
    except BaseException:
        handshake.close()
        raise
    if not request.detach:
        return Launched(procs.get(recorded.new.run_id), shim, lease)
    shim.wait()  # the first shim forks and leaves at once; the second is nobody's child
    return Launched(procs.get(recorded.new.run_id))


def spawn_shim(
    recorded: Recorded, *, tee: bool = False, parent: int = 0
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start the run's shim and hand it the witness key; its report is read from the socket.

    A socket, not a pipe: the key goes to the shim on it and the report comes
    back. The shim survives a launcher that dies before reading the report.
    """
    new, folder, env = recorded.new, recorded.folder, recorded.request.env
    ours, theirs = socket.socketpair()
    shim_fd = theirs.fileno()
    argv = [sys.executable, "-m", "watchkeeper.procs.shim", new.run_id, str(folder)]
    argv += [str(shim_fd), "1" if new.detach else "0", "1" if tee else "0", str(parent)]
    argv += ["--", *new.argv]
    try:
        with (folder / witness.LOG_NAME).open("ab") as shim_errors:
            shim = subprocess.Popen(
                argv,
                cwd=new.cwd,
                env={**(os.environ if env is None else env), RUN_ID_ENV: new.run_id},
                pass_fds=(shim_fd,),
                start_new_session=new.detach,
                stdin=subprocess.DEVNULL,
                stdout=None if tee else subprocess.DEVNULL,
                stderr=shim_errors,
            )
    except OSError:
        ours.close()
        raise
    finally:
        theirs.close()
    lease = recorded.request.lease
    first = recorded.key.encode() + (b" " + _lease_line(*lease) if lease is not None else b"")
    try:
        ours.sendall(first + b"\n")
        if lease is None:
            ours.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the shim is already gone: its missing report says so
    return shim, ours


def _record_handshake(
    procs: RunMoves, run_id: str, line: bytes, shim: subprocess.Popen[bytes], clock: Now
) -> None:
    try:
        report = json.loads(line) if line else {"error": "the shim stopped before reporting"}
    except ValueError:
        report = {"error": f"the shim reported nonsense: {line[:200]!r}"}
    if "error" in report:
        shim.wait()
        message = str(report["error"])
        _fail(procs, run_id, message, clock)
        raise LaunchFailed(message, run_id)
    started = Started(
        shim_pid=int(report["shim_pid"]),
        shim_start=str(report["shim_start"]),
        pid=int(report["pid"]),
        pid_start=str(report["pid_start"]),
        pgid=int(report["pgid"]),
    )
    procs.mark_started(run_id, started, clock())
    log.info("Started process run %s (pid %s)", run_id, started.pid, extra={"action": "proc_start"})


def _fail(procs: RunMoves, run_id: str, reason: str, clock: Now) -> None:
    procs.finish(run_id, ProcStatus.FAILED, clock(), exit_code=127, reason=reason)
