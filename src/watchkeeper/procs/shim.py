"""The shim: owns one command, holds its log, and writes its witness on exit.

``python -m watchkeeper.procs.shim RUN_ID RUN_DIR HANDSHAKE_FD DETACH TEE -- CMD...``

The command starts in a process group of its own (so an abort reaches its
children too) with ``WATCHKEEPER_RUN_ID`` in its environment and stdin on
``/dev/null``. Detached, the shim also forks once more after its parent put it
in a new session, so the launcher can reap it at once and nothing of the run
is a child of the caller. It reports the owner (its pid, the command's pid,
their start times) on the handshake pipe and in ``owner.json``, waits for the
command, and records how it ended in ``witness.json``. Signals sent to the
shim are passed on to the command's group.

Only the standard library and two small sibling modules: it must start fast.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from watchkeeper.procs import identity, witness

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Python ignores SIGPIPE and Python-level handlers vanish on exec; restore what a shell would.
_DEFAULT_IN_CHILD = (signal.SIGPIPE, signal.SIGXFSZ, *_FORWARDED)
_CHUNK = 65536


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


def _pump(read_fd: int, log_fd: int) -> None:
    while chunk := os.read(read_fd, _CHUNK):
        os.write(log_fd, chunk)
        try:
            os.write(1, chunk)
        except OSError:
            continue  # the terminal went away; the log still gets everything
    os.close(read_fd)


def _report(handshake_fd: int, run_dir: str, owner: dict[str, object]) -> None:
    witness.write_json_atomic(os.path.join(run_dir, witness.OWNER_NAME), owner)
    os.write(handshake_fd, json.dumps(owner).encode() + b"\n")
    os.close(handshake_fd)


def _failed_to_start(run_id: str, run_dir: str, handshake_fd: int, exc: OSError) -> int:
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    message = f"cannot start {exc.filename or 'the command'}: {exc.strerror}"
    witness.write(run_dir, witness.Witness(run_id, code, None, time.time(), message))
    os.write(handshake_fd, json.dumps({"error": message}).encode() + b"\n")
    os.close(handshake_fd)
    return code


def run(run_id: str, run_dir: str, handshake_fd: int, tee: bool, argv: list[str]) -> int:
    """Start ``argv``, report its owner, wait for it and write the witness."""
    os.set_inheritable(handshake_fd, False)
    log_fd = os.open(
        os.path.join(run_dir, witness.LOG_NAME), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
    )
    read_fd, out_fd = os.pipe() if tee else (-1, log_fd)
    try:
        pid = _spawn(argv, out_fd)
    except OSError as exc:
        return _failed_to_start(run_id, run_dir, handshake_fd, exc)
    finally:
        if tee:
            os.close(out_fd)
    _forward_signals(pid)
    me = os.getpid()
    owner = {
        "run_id": run_id,
        "shim_pid": me,
        "shim_start": identity.start_time(me),
        "pid": pid,
        "pid_start": identity.start_time(pid, allow_zombie=True),
        "pgid": pid,
    }
    _report(handshake_fd, run_dir, owner)
    if tee:
        _pump(read_fd, log_fd)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    ended = time.time()
    os.close(log_fd)
    exit_code, signum = (code, None) if code >= 0 else (None, -code)
    witness.write(run_dir, witness.Witness(run_id, exit_code, signum, ended))
    return code if code >= 0 else 128 - code


def main(args: list[str]) -> int:
    """Entry point; arguments as in the module docstring."""
    run_id, run_dir, handshake, detach, tee, sep, *argv = args
    if sep != "--" or not argv:
        sys.stderr.write("usage: shim RUN_ID RUN_DIR HANDSHAKE_FD DETACH TEE -- CMD...\n")
        return 2
    if detach == "1" and os.fork() > 0:
        # The launcher reaps this first shim at once; the second one is nobody's child.
        os._exit(0)
    return run(run_id, run_dir, int(handshake), tee == "1", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
