"""Starting a child with libc's posix_spawn: one vfork and exec, no Python in between.

``subprocess.Popen`` prepares each start in Python, about twice the
supervisor's CPU of a bare spawn; ``os.posix_spawn`` in Python 3.11 can neither
change directory nor close every other descriptor without listing them all
first (a read of /proc per start, growing with the number of children, which
costs as much as Popen's preparation). glibc 2.34 and later can do both in the
child (``posix_spawn_file_actions_addchdir_np`` and ``..._addclosefrom_np``),
so the child is set up as Popen sets it up: stdin from /dev/null, its own
session, the signals Python ignores back at their default, no descriptor of the
supervisor's but the notify pipe, the working directory given, and the program
looked up on the ``PATH`` of the child's environment. Where that libc is not
there, :func:`available` is false and the caller keeps to Popen.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: The descriptor number the notify pipe has in the child.
NOTIFY_FD = 3

# glibc's flag values (spawn.h); only glibc is used here.
_SETSIGDEF = 0x04
_SETSID = 0x80
# Popen's restore_signals: Python ignores these, and an ignored signal stays ignored across exec.
_RESTORED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)
# Larger than glibc's posix_spawn_file_actions_t (80 bytes), posix_spawnattr_t (336) and
# sigset_t (128) on any architecture: the types are opaque, so room to spare is the safe size.
_OPAQUE_WORDS = 128


class _Libc:
    def __init__(self) -> None:
        import ctypes

        libc = ctypes.CDLL(None)
        self.ctypes = ctypes
        # Looked up first: a libc without them raises AttributeError, and Popen is used instead.
        self.addclosefrom = libc.posix_spawn_file_actions_addclosefrom_np
        self.addchdir = libc.posix_spawn_file_actions_addchdir_np
        self.spawn = libc.posix_spawn
        self.spawnp = libc.posix_spawnp
        self.fa_init = libc.posix_spawn_file_actions_init
        self.fa_destroy = libc.posix_spawn_file_actions_destroy
        self.addopen = libc.posix_spawn_file_actions_addopen
        self.adddup2 = libc.posix_spawn_file_actions_adddup2
        self.attr_init = libc.posix_spawnattr_init
        self.attr_destroy = libc.posix_spawnattr_destroy
        self.setflags = libc.posix_spawnattr_setflags
        self.setsigdefault = libc.posix_spawnattr_setsigdefault
        self.sigemptyset = libc.sigemptyset
        self.sigaddset = libc.sigaddset
        ptr, num, text = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
        signatures: tuple[tuple[Any, list[Any]], ...] = (
            (self.addclosefrom, [ptr, num]),
            (self.addchdir, [ptr, text]),
            (self.spawn, [ptr, text, ptr, ptr, ptr, ptr]),
            (self.spawnp, [ptr, text, ptr, ptr, ptr, ptr]),
            (self.fa_init, [ptr]),
            (self.fa_destroy, [ptr]),
            (self.addopen, [ptr, num, text, num, ctypes.c_uint]),
            (self.adddup2, [ptr, num, num]),
            (self.attr_init, [ptr]),
            (self.attr_destroy, [ptr]),
            (self.setflags, [ptr, ctypes.c_short]),
            (self.setsigdefault, [ptr, ptr]),
            (self.sigemptyset, [ptr]),
            (self.sigaddset, [ptr, num]),
        )
        for fn, args in signatures:
            fn.argtypes, fn.restype = args, num
        self.sigdef = (ctypes.c_uint64 * _OPAQUE_WORDS)()
        self.sigemptyset(self.sigdef)
        for sig in _RESTORED_SIGNALS:
            self.sigaddset(self.sigdef, int(sig))

    def run(
        self,
        path: bytes,
        argv: list[bytes],
        envp: list[bytes],
        *,
        search: bool,
        cwd: bytes | None,
        out: int | None,
        notify_fd: int,
    ) -> int:
        ct = self.ctypes
        actions = (ct.c_uint64 * _OPAQUE_WORDS)()
        attr = (ct.c_uint64 * _OPAQUE_WORDS)()
        _check(self.fa_init(actions))
        try:
            _check(self.attr_init(attr))
            try:
                _check(self.addopen(actions, 0, os.devnull.encode(), os.O_RDWR, 0))
                if out is not None:
                    _check(self.adddup2(actions, out, 1))
                    _check(self.adddup2(actions, out, 2))
                if notify_fd >= 0:
                    _check(self.adddup2(actions, notify_fd, NOTIFY_FD))
                _check(self.addclosefrom(actions, NOTIFY_FD + 1 if notify_fd >= 0 else 3))
                if cwd is not None:
                    _check(self.addchdir(actions, cwd))
                _check(self.setsigdefault(attr, self.sigdef))
                _check(self.setflags(attr, _SETSID | _SETSIGDEF))
                pid = ct.c_int()
                c_argv = (ct.c_char_p * (len(argv) + 1))(*argv)
                c_envp = (ct.c_char_p * (len(envp) + 1))(*envp)
                call = self.spawnp if search else self.spawn
                err = int(call(ct.byref(pid), path, actions, attr, c_argv, c_envp))
                if err:
                    raise OSError(err, os.strerror(err))
                return int(pid.value)
            finally:
                self.attr_destroy(attr)
        finally:
            self.fa_destroy(actions)


def _check(err: int) -> None:
    if err:
        raise OSError(err, os.strerror(err))


_libc: _Libc | None = None
_tried = False


def _load() -> _Libc | None:
    global _libc, _tried
    if not _tried:
        _tried = True
        if sys.platform.startswith("linux") and _glibc_at_least(2, 34):
            try:
                _libc = _Libc()
            except (OSError, AttributeError):
                _libc = None
    return _libc


def _glibc_at_least(major: int, minor: int) -> bool:
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return False
    name, _, number = version.partition(" ")
    if name != "glibc":
        return False
    try:
        found = tuple(int(x) for x in number.split(".")[:2])
    except ValueError:
        return False
    return found >= (major, minor)


def available() -> bool:
    """Whether :func:`spawn` can start children here (Linux with glibc 2.34 or later)."""
    return _load() is not None


def _encoded(env: Mapping[str, str]) -> list[bytes]:
    # One encode per entry: fsencode of key and value apart costs six times as much.
    encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    envp = []
    for key, value in env.items():
        if "=" in key:
            raise ValueError("illegal environment variable name")
        entry = f"{key}={value}"
        if "\0" in entry:
            raise ValueError("embedded null byte")
        envp.append(entry.encode(encoding, errors))
    return envp


def spawn(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: str | None = None,
    out: int | None = None,
    notify_fd: int = -1,
) -> int:
    """Start ``argv`` as Popen would with ``start_new_session=True``; its pid.

    stdin is /dev/null; ``out`` (if given) becomes stdout and stderr;
    ``notify_fd`` (if not -1) is the child's descriptor :data:`NOTIFY_FD`;
    every other descriptor is closed. A program that cannot be run raises the
    ``OSError`` Popen raises, naming the program (or ``cwd`` when that is what
    is missing). Needs :func:`available`.
    """
    libc = _load()
    if libc is None:
        raise RuntimeError("posix_spawn with closefrom and chdir is not available here")
    if not argv:
        raise ValueError("argv must not be empty")
    program = argv[0]
    args = [os.fsencode(a) for a in argv]
    if any(b"\0" in a for a in args):
        raise ValueError("embedded null byte")
    envp = _encoded(env)
    c_cwd = os.fsencode(cwd) if cwd is not None else None

    def run(path: bytes, search: bool) -> int:
        return libc.run(path, args, envp, search=search, cwd=c_cwd, out=out, notify_fd=notify_fd)

    try:
        if os.path.dirname(program) or env.get("PATH") == os.environ.get("PATH"):
            # libc searches the supervisor's PATH, which here is the child's too.
            return run(args[0], True)
        return _search(program, env, run)
    except OSError as exc:
        err = exc.errno or 0
        if cwd is not None and not os.path.isdir(cwd):
            raise OSError(err, os.strerror(err), cwd) from None
        raise OSError(err, os.strerror(err), program) from None


def _search(program: str, env: Mapping[str, str], run: Callable[[bytes, bool], int]) -> int:
    # The child's PATH differs from ours: search it here, keeping Popen's choice of
    # error, the first that is not "not there", else the last.
    first: OSError | None = None
    last: OSError = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    for path in (os.path.join(d, program) for d in os.get_exec_path(env)):
        if os.path.isabs(path):
            try:
                os.stat(path)
            except (FileNotFoundError, NotADirectoryError) as exc:
                last = exc  # what exec would say, without a vfork to hear it
                continue
            except OSError:
                pass  # let exec say it
        try:
            return run(os.fsencode(path), False)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                last = exc
            else:
                first = first or exc
    raise first or last
