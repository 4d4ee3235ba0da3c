"""How process children are started: posix_spawn where the options allow, Popen's behaviour kept.

Restart latency is set by the cost of starting a child; these guards hold the
cheap path in place without timing anything.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.supervise import (
    Backoff,
    ChildExited,
    ChildHeartbeat,
    ExitReason,
    ManualClock,
    Restart,
    StartError,
    SupervisorBuilder,
    process_child,
    spawn,
)
from watchkeeper.supervise.testing import next_event

pytestmark = pytest.mark.anyio

NOTIFY = """
import os, signal, sys, time
fd = int(os.environ["WATCHKEEPER_NOTIFY_FD"])
def say(line):
    os.write(fd, (line + "\\n").encode())
"""


def python(code: str) -> list[str]:
    return [sys.executable, "-c", NOTIFY + textwrap.dedent(code)]


def tree() -> SupervisorBuilder:
    return SupervisorBuilder("spawn").backoff(Backoff.none()).intensity(10, 5.0)


GLIBC_SPAWN = sys.platform.startswith("linux") and spawn._glibc_at_least(2, 34)
needs_spawn = pytest.mark.skipif(not GLIBC_SPAWN, reason="libc without posix_spawn closefrom")


class Starts:
    """Records how children were started in this process: libc's posix_spawn or Popen."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.spawned: list[str] = []
        self.popened: list[str] = []
        real_run = spawn._Libc.run
        real_popen: Any = subprocess.Popen

        def run(libc: Any, path: bytes, *args: Any, **kw: Any) -> int:
            self.spawned.append(os.fsdecode(path))
            return real_run(libc, path, *args, **kw)

        class Popen(real_popen):  # type: ignore[misc]
            def __init__(inner, args: Any, *a: Any, **kw: Any) -> None:  # noqa: N805
                self.popened.append(str(args[0]))
                super().__init__(args, *a, **kw)

        monkeypatch.setattr(spawn._Libc, "run", run)
        monkeypatch.setattr(subprocess, "Popen", Popen)


async def heard(spec_argv: list[str], monkeypatch: pytest.MonkeyPatch, **kw: Any) -> str:
    """What the child said in its first STATUS= line."""
    spec = process_child("c", spec_argv, notify=True, **kw)
    sup = tree().events(heartbeat_interval_s=0.0).child(spec).build(ManualClock())
    sub = sup.subscribe()
    handle = await sup.start()
    try:
        beat = await next_event(sub, ChildHeartbeat)
    finally:
        await handle.stop()
    return beat.step or ""


@needs_spawn
@pytest.mark.parametrize("in_cwd", [False, True], ids=["no cwd", "a cwd"])
async def test_a_child_is_started_through_posix_spawn_not_popen(
    in_cwd: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert spawn.available()
    starts = Starts(monkeypatch)
    code = "say('STATUS=' + os.environ['WATCHKEEPER_NOTIFY_FD'] + ' ' + os.getcwd())"
    cwd = str(tmp_path) if in_cwd else None
    said = await heard(python(code + "; time.sleep(3600)"), monkeypatch, cwd=cwd)
    assert said == f"3 {os.path.realpath(cwd or os.getcwd())}"
    assert starts.spawned == [sys.executable]
    assert starts.popened == []


async def test_without_the_libc_a_child_is_started_by_popen_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spawn, "available", lambda: False)
    starts = Starts(monkeypatch)
    code = "say('STATUS=' + os.getcwd()); time.sleep(3600)"
    said = await heard(python(code), monkeypatch, cwd=str(tmp_path))
    assert said == os.path.realpath(tmp_path)
    assert (starts.spawned, starts.popened) == ([], [sys.executable])


async def test_a_missing_cwd_fails_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = process_child("lost", ["true"], cwd=str(tmp_path / "gone"))
    with pytest.raises(StartError, match="lost"):
        await tree().child(spec).build(ManualClock()).start()
    assert "FileNotFoundError(2, 'No such file or directory')" in caplog.text


async def test_the_child_gets_what_popen_gave_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # stdin from /dev/null, a session of its own, and only the notify pipe
    # beyond 0-2 even when the parent holds an inheritable descriptor.
    leaked_r, leaked_w = os.pipe()
    os.set_inheritable(leaked_w, True)
    code = f"""
        fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))
        st = os.fstat(0)
        devnull = os.stat(os.devnull)
        same = (st.st_dev, st.st_ino) == (devnull.st_dev, devnull.st_ino)
        print_ = [
            'stdin-devnull' if same else 'stdin-other',
            'leader' if os.getsid(0) == os.getpid() else 'not-leader',
            'leak' if {leaked_w} in fds and {leaked_w} != fd else 'no-leak',
        ]
        say('STATUS=' + ' '.join(print_)); time.sleep(3600)
    """
    try:
        said = await heard(python(code), monkeypatch)
    finally:
        os.close(leaked_r)
        os.close(leaked_w)
    assert said == "stdin-devnull leader no-leak"


async def test_signals_python_ignores_are_at_their_default_in_the_child() -> None:
    # Python ignores SIGPIPE and SIGXFSZ; Popen restored them, and so must a spawn.
    spec = process_child("sleeper", ["sleep", "3600"])
    handle = await tree().child(spec).build(ManualClock()).start()
    try:
        pid = handle.children()[0].pid
        assert pid is not None
        status = Path(f"/proc/{pid}/status").read_text()
    finally:
        await handle.stop()
    ignored = int(next(x for x in status.splitlines() if x.startswith("SigIgn:")).split()[1], 16)
    assert ignored & (1 << (signal.SIGPIPE - 1)) == 0
    assert ignored & (1 << (signal.SIGXFSZ - 1)) == 0


@needs_spawn
async def test_a_bare_program_name_is_looked_up_on_the_childs_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not the supervisor's PATH: the one in the env given to the child, as Popen does.
    script = tmp_path / "only-here"
    script.write_text(f"#!{sys.executable}\n" + NOTIFY + "say('STATUS=found'); time.sleep(3600)\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    starts = Starts(monkeypatch)
    path = f"{tmp_path / 'missing'}:{tmp_path}:{os.environ.get('PATH', '')}"
    said = await heard(["only-here"], monkeypatch, env={"PATH": path})
    assert said == "found"
    assert starts.spawned == [str(script)]


@pytest.mark.parametrize("own_path", [True, False], ids=["the childs PATH", "the same PATH"])
async def test_a_bare_program_name_missing_from_path_fails_the_start(
    own_path: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"PATH": str(tmp_path)} if own_path else None
    spec = process_child("ghost", ["no-such-program-anywhere"], env=env)
    with pytest.raises(StartError, match="ghost"):
        await tree().child(spec).build(ManualClock()).start()
    assert "FileNotFoundError(2, 'No such file or directory')" in caplog.text


async def test_a_program_that_cannot_be_executed_fails_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plain = tmp_path / "plain"
    plain.write_text("not a program\n")
    spec = process_child("plain", [str(plain)])
    with pytest.raises(StartError, match="plain"):
        await tree().child(spec).build(ManualClock()).start()
    assert "PermissionError(13, 'Permission denied')" in caplog.text


async def test_an_exit_is_reaped_with_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    starts = Starts(monkeypatch)
    spec = process_child(
        "die",
        [sys.executable, "-c", "import os; os.kill(os.getpid(), 15)"],
        restart=Restart.TEMPORARY,
    )
    sup = tree().child(spec).build(ManualClock())
    sub = sup.subscribe()
    handle = await sup.start()
    exited = await next_event(sub, ChildExited)
    assert (exited.reason, exited.exit_code) == (ExitReason.KILLED, -signal.SIGTERM)
    assert "killed by SIGTERM" in exited.detail
    assert starts.spawned == ([sys.executable] if GLIBC_SPAWN else [])
    await handle.stop()
