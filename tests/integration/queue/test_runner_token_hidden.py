"""A task cannot read its runner's token from the runner's ``/proc`` entry.

A real runner daemon gets its token from ``WATCHKEEPER_TOKEN`` and runs a task
that looks for it where a process of the runner's user could: the runner's
``/proc/<pid>/environ``, which shows the environment the runner started with
whatever it later removed from ``os.environ``. Each of the runner's two
defences is shown on its own:

- as root (``CAP_SYS_PTRACE``: nothing keeps it out of the file), the task
  reads the file, and the token is no longer in it: its bytes were overwritten;
- as another user without that capability, the task may not open the file at
  all (the runner is non-dumpable), while it can read the file of a process of
  the same user that is not.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.store import Store

from .. import queue_daemons as daemons
from ..queue_daemons import QUICK, queue_server, server_env

TIMEOUT_S = 60.0
_CAP_SYS_PTRACE = 19
# Another user: ``nobody``, keeping only what it needs to reach the test's files.
_CAPS = "+dac_override,+dac_read_search"
AS_NOBODY = (
    "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    f"--inh-caps={_CAPS}",
    f"--ambient-caps={_CAPS}",
)

# Finds its runner (its shim's parent) and reads the runner's /proc environ and, to show that
# such a file is open to it at all, that of a plain process of its own. A shell script: the
# interpreter of the tests may sit where another user cannot reach it.
PROBE = r"""
out=$1
runner=$(sed 's/.*) //' /proc/$PPID/stat | cut -d' ' -f2)
echo "$runner" > "$out/runner"
cat "/proc/$runner/environ" > "$out/runner_env" 2> "$out/runner_error"
echo $? > "$out/runner_read"
sleep 60 & plain=$!
cat "/proc/$plain/environ" > /dev/null 2> "$out/plain_error"
echo $? > "$out/plain_read"
kill "$plain"
touch "$out/done"
"""


def _capable_of_ptrace() -> bool:
    with open("/proc/self/status", encoding="ascii") as file:
        effective = next(line for line in file if line.startswith("CapEff:")).split()[1]
    return bool(int(effective, 16) >> _CAP_SYS_PTRACE & 1)


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store) as live:
        yield live


def _probe_under_a_runner(
    server: LiveServer, tmp_path: Path, prefix: tuple[str, ...] = ()
) -> tuple[dict[str, Any], int]:
    """Run the probe as a task of a real runner (started under ``prefix``); what it saw."""
    out = tmp_path / "probe"
    out.mkdir()
    env = {**server_env(server), "RUNNER_MARK": "in-the-runners-environment"}
    daemon = daemons.start_runner(
        "e2e",
        tmp_path / "runner",
        tmp_path / "runner.log",
        *QUICK,
        env=env,
        command=(*prefix, sys.executable, "-m", "watchkeeper"),
    )
    try:
        with Client(server.url, server.tokens["admin"]) as admin:
            job = admin.jobs.submit(
                "probe", org="o", fleet="e2e", argv=["sh", "-c", PROBE, "probe", str(out)]
            )
            wait_for(
                lambda: admin.jobs.get(job["id"])["status"] in ("succeeded", "failed"),
                what="the probe task's end",
                timeout=TIMEOUT_S,
            )
            assert admin.jobs.get(job["id"])["status"] == "succeeded", (
                tmp_path / "runner.log"
            ).read_text()
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            daemon.kill()  # its stopping is not what this test is about
            daemon.wait()
    assert (out / "done").exists()
    seen = {
        "runner": int((out / "runner").read_text()),
        "runner_read": int((out / "runner_read").read_text()) == 0,
        "runner_env": (out / "runner_env").read_bytes().decode("utf-8", "replace"),
        "runner_error": (out / "runner_error").read_text(),
        "plain_read": int((out / "plain_read").read_text()) == 0,
        "plain_error": (out / "plain_error").read_text(),
    }
    return seen, daemon.pid


def test_the_runners_token_is_gone_from_its_initial_environment(
    server: LiveServer, tmp_path: Path
) -> None:
    if not _capable_of_ptrace():
        pytest.skip("only a reader with CAP_SYS_PTRACE may open a non-dumpable runner's environ")
    seen, runner = _probe_under_a_runner(server, tmp_path)
    assert seen["runner"] == runner
    assert seen["runner_read"], seen["runner_error"]  # root: non-dumpable keeps nothing out
    environ = seen["runner_env"]
    assert "RUNNER_MARK=in-the-runners-environment" in environ  # the real environment
    assert server.tokens["reporter"] not in environ
    assert "WATCHKEEPER_TOKEN=" not in environ
    assert "WATCHKEEPER_URL=" in environ  # only the token was taken out


def test_a_task_of_another_user_may_not_open_its_runners_environ(
    server: LiveServer, tmp_path: Path
) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to run the runner as another user")
    seen, runner = _probe_under_a_runner(server, tmp_path, AS_NOBODY)
    assert seen["runner"] == runner
    assert seen["plain_read"], seen["plain_error"]  # its user's files are open to it...
    assert not seen["runner_read"]  # ...but not its runner's
    assert "Permission denied" in seen["runner_error"]
    assert seen["runner_env"] == ""
