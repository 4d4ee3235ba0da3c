"""A live process whose ``/proc`` entry we may not read is unknown, never gone.

The view is real: a private mount namespace with its own ``/proc`` mounted
``hidepid``, and the looker running as another user (``nobody``, keeping only
the file-permission capabilities it needs to reach the store and the data
folder; without ``CAP_SYS_PTRACE`` the kernel hides other users' processes
from it). The runs' processes belong to this test's user and are alive.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from watchkeeper.procs import identity
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import ProcStatus

from ...support.cli import wk
from .conftest import gone, start_detached

MODES = ("invisible", "noaccess")
_CAPS = "+dac_override,+dac_read_search"


def hidden_view(mode: str) -> list[str]:
    """A command prefix: what follows runs as ``nobody`` under ``/proc`` mounted ``hidepid``."""
    script = 'mount -t proc -o "hidepid=$0" proc /proc && exec "$@"'
    setpriv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    setpriv += [f"--inh-caps={_CAPS}", f"--ambient-caps={_CAPS}"]
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, mode, *setpriv]


@pytest.fixture(params=MODES)
def hidden(request: pytest.FixtureRequest) -> list[str]:
    """The prefix for one ``hidepid`` mode; skipped where this machine cannot make the view."""
    mode: str = request.param
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("needs unshare and setpriv (util-linux)")
    # Only cat's own refusal proves the view: a failed unshare or mount says it cannot be made.
    probe = subprocess.run(
        [*hidden_view(mode), "cat", "/proc/1/stat"], capture_output=True, text=True, check=False
    )
    if probe.returncode == 0 or not probe.stderr.startswith("cat: /proc/1/stat"):
        pytest.skip(f"cannot hide /proc from another user here: {probe.stderr.strip()}")
    return hidden_view(mode)


def _ownership_seen(prefix: Sequence[str], pid: int, start: str) -> str:
    code = (
        "import sys; from watchkeeper.procs import identity as i; "
        "print(i.ownership(i.host(), i.boot_id(), int(sys.argv[1]), sys.argv[2]).value)"
    )
    seen = subprocess.run(
        [*prefix, sys.executable, "-c", code, str(pid), start],
        capture_output=True,
        text=True,
        check=False,
    )
    assert seen.returncode == 0, seen.stderr
    return seen.stdout.strip()


def test_a_live_process_we_may_not_read_is_unknown_and_a_gone_one_still_gone(
    hidden: list[str],
) -> None:
    with subprocess.Popen(["sleep", "60"]) as live:
        try:
            start = identity.start_time(live.pid)
            assert start is not None
            assert _ownership_seen(hidden, live.pid, start) == "unknown"
        finally:
            live.kill()
    with subprocess.Popen(["true"]) as short:
        short.wait()
    assert _ownership_seen(hidden, short.pid, start) == "gone"


def test_reclaim_leaves_a_run_it_cannot_see_and_status_shows_it_unknown(
    engine: ProcEngine, hidden: list[str], tmp_path: Path
) -> None:
    fired_file = tmp_path / "fired"
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n')
    run = start_detached(engine, "sleep", "120", on_done_cmd=f"echo fired >> {fired_file}")
    before = engine.get(run.run_id)
    command = [*hidden, sys.executable, "-m", "watchkeeper", "--config", str(config)]

    reclaimed = wk("reclaim", "--json", "--store", engine.store.url, command=command)
    assert reclaimed.returncode == 0, reclaimed.stderr
    assert json.loads(reclaimed.stdout)["reclaimed"] == []
    assert engine.get(run.run_id).as_dict() == before.as_dict()
    assert not fired_file.exists()
    assert before.pid is not None and not gone(before.pid)

    shown = wk("status", run.run_id, "--json", "--store", engine.store.url, command=command)
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)
    assert (body["status"], body["effective_status"], body["alive"]) == ("running", "unknown", None)
    listed = wk("ps", "--json", "--store", engine.store.url, command=command)
    assert [row["effective_status"] for row in json.loads(listed.stdout)] == ["unknown"]

    # Seen plainly the run is alive and ours, and stays running.
    assert engine.effective_status(engine.get(run.run_id)) == "running"
    assert engine.reap().reclaimed == []
    assert engine.get(run.run_id).status is ProcStatus.RUNNING


def test_abort_of_a_run_it_cannot_see_refuses_and_changes_nothing(
    engine: ProcEngine, hidden: list[str], tmp_path: Path
) -> None:
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n')
    run = start_detached(engine, "sleep", "120")
    before = engine.get(run.run_id)
    command = [*hidden, sys.executable, "-m", "watchkeeper", "--config", str(config)]

    aborted = wk("abort", run.run_id, "--store", engine.store.url, command=command)
    # Unknown is not gone: no "already exited", no run failed as lost, no signal sent.
    assert aborted.returncode != 0
    assert "cannot be seen" in aborted.stderr, aborted.stderr
    assert engine.get(run.run_id).as_dict() == before.as_dict()
    assert before.pid is not None and not gone(before.pid)
    assert engine.abort(run.run_id).outcome.value == "signaled"  # seen plainly, it is ours
