"""The keeper: holds one program's whole process tree, as ``run``'s shim holds a run's.

``python -m watchkeeper.programs.keeper PARENT STOP_SIGNAL STOP_TIMEOUT_S -- CMD...``

The supervisor starts the keeper, not the command: the keeper becomes a child
subreaper (:mod:`watchkeeper.procs.containment`), starts the command in a process
group of its own with the keeper's environment, folder and output, and waits
for it. A descendant whose parent exits is re-parented to the keeper, even one
that left the command's group and session with ``setsid``; when the command's
leader exits, the keeper ends every descendant still there (SIGTERM, SIGKILL
after a short grace), says what it ended on its standard error (the program's
log), and exits as the command did: the same status, or killed by the same
signal, so the supervisor judges the command's exit.

SIGTERM asks the keeper to stop the program: it sends ``STOP_SIGNAL`` to the
command's group and, if the group is still there after ``STOP_TIMEOUT_S``,
SIGKILL. Other signals it is sent are passed on to the group. When ``PARENT``
(the server) dies, Linux tells the keeper, and it stops the program the same way:
a program never outlives the server that supervises it.

Only the standard library and ``containment``: it starts at every (re)start.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys

from watchkeeper.procs import containment

_PASSED_ON = (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)
_PARENT_GONE = signal.SIGUSR2
_PR_SET_PDEATHSIG = 1
# Restored in the command: Python ignores SIGPIPE, and handlers vanish on exec anyway.
_DEFAULT_IN_CHILD = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, _PARENT_GONE, *_PASSED_ON)


def say(text: str) -> None:
    """A line in the program's log, marked as the keeper's own."""
    with contextlib.suppress(OSError):
        os.write(2, f"[watchkeeper keeper] {text}\n".encode())


class Keeper:
    """One command under the keeper: its group, and how it is stopped."""

    def __init__(self, parent: int, stop_signal: signal.Signals, stop_timeout_s: float) -> None:
        self.parent = parent
        self.stop_signal = stop_signal
        self.stop_timeout_s = stop_timeout_s
        self.pgid = 0
        self.stopping = False

    def start(self, argv: list[str]) -> int:
        """Start the command in a group of its own; its pid."""
        self.pgid = os.posix_spawnp(
            argv[0], argv, os.environ, setpgroup=0, setsigdef=_DEFAULT_IN_CHILD
        )
        return self.pgid

    def watch(self) -> None:
        """Stop the program on SIGTERM or when the server dies; pass other signals on."""
        signal.signal(signal.SIGTERM, lambda _s, _f: self.stop("asked to stop"))
        signal.signal(_PARENT_GONE, lambda _s, _f: self._parent_check())
        signal.signal(signal.SIGALRM, lambda _s, _f: self._kill())
        signal.signal(signal.SIGCHLD, lambda _s, _f: self._reap_others())
        for signum in _PASSED_ON:
            signal.signal(signum, lambda s, _f: self._signal(s))
        if sys.platform.startswith("linux"):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(_PARENT_GONE), 0, 0, 0)
        self._parent_check()  # it may have died before the request: nothing would say so

    def stop(self, why: str) -> None:
        """The stop signal to the group now, SIGKILL after the stop timeout."""
        if self.stopping:
            return
        self.stopping = True
        self._signal(self.stop_signal)
        if self.stop_timeout_s > 0:
            signal.setitimer(signal.ITIMER_REAL, self.stop_timeout_s)
        else:
            self._kill()
        say(f"{why}: sent SIG{self.stop_signal.name.removeprefix('SIG')} to the program")

    def _parent_check(self) -> None:
        if os.getppid() != self.parent:
            self.stop(f"the server (pid {self.parent}) went away")

    def _kill(self) -> None:
        say(
            f"the program was still running {self.stop_timeout_s:g} s after its stop signal: "
            "sending SIGKILL"
        )
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.pgid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pgid, signum)

    def _reap_others(self) -> None:
        """Reap descendants re-parented here that exited, never the leader (kept for its exit)."""
        me = os.getpid()
        try:
            with open(f"/proc/{me}/task/{me}/children") as file:
                children = [int(pid) for pid in file.read().split()]
        except OSError:
            return
        for pid in children:
            if pid != self.pgid:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)


def exit_like(status: int) -> None:
    """End this process as the command ended: its exit status, or its signal."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        os._exit(code)
    signum = -code
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the command's core, not the keeper's
    signal.setitimer(signal.ITIMER_REAL, 0)
    with contextlib.suppress(OSError, ValueError):
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
    os._exit(128 + signum)


def run(parent: int, stop_signal: signal.Signals, stop_timeout_s: float, argv: list[str]) -> int:
    """Start ``argv`` under the keeper, wait for it, end what it left, exit as it did."""
    kind = containment.become_subreaper()
    keeper = Keeper(parent, stop_signal, stop_timeout_s)
    keeper.watch()
    try:
        pid = keeper.start(argv)
    except OSError as exc:
        say(f"cannot start {argv[0]}: {exc.strerror}")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    # The leader stays unreaped until the rest is ended: its pid and group id stay ours.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if kind == containment.SUBREAPER:
        tree = containment.Tree(pid)
        tree.end()
        ended = ", ".join(f"{e['pid']} ({e['name']})" for e in tree.record())
        if ended:
            say(f"the program's leader exited; ended what it left running: {ended}")
    _, status = os.waitpid(pid, 0)
    exit_like(status)
    return 0  # not reached: exit_like ends the process


def main(args: list[str]) -> int:
    """Entry point; arguments as in the module docstring."""
    try:
        parent, stop_name, timeout, sep, *argv = args
        stop_signal = signal.Signals[f"SIG{stop_name}"]
        if sep != "--" or not argv:
            raise ValueError(sep)
        return run(int(parent), stop_signal, float(timeout), argv)
    except (ValueError, KeyError):
        sys.stderr.write("usage: keeper PARENT STOP_SIGNAL STOP_TIMEOUT_S -- CMD...\n")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
