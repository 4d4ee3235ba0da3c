"""``run`` from any folder, with a server in reach: the process runs here, the run is on the server.

Every command runs as a real subprocess, from a folder of its own with no
``WATCHKEEPER_*`` settings but the server's URL and token, against a real
``watchkeeper serve`` on loopback. The run must be found where every other command
looks (``status``, ``ps``, ``logs``, ``wait``), judged by the server's own sweep, and
nothing may be made in the folder it was started from. Without a server the run is
recorded in the local store, and ``run`` says so.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import patient_http

from ..support.cli import wk
from ..support.live_server import free_port
from ..support.serving import serving
from ..support.waiting import wait_for
from .test_cli_finds_server import bare_env, default_port_refused  # noqa: F401 - a fixture

Server = tuple[str, str]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A real ``serve`` sweeping every second: its URL and first admin token."""
    config = tmp_path / "server.toml"
    config.write_text(f'data_dir = "{tmp_path / "server-data"}"\ncheck_interval_s = 1\n')
    with serving(config) as (_process, url, token):
        yield url, token


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """The folder the commands are typed in: far from the server's, and empty."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


@pytest.fixture
def state_home(tmp_path: Path) -> Iterator[Path]:
    """This user's state folder, where the runs a server records keep their files here."""
    folder = tmp_path / "state"
    yield folder
    _end_leftovers(folder)


def _end_leftovers(state: Path) -> None:
    """End every command a failed test left running, by its owner file's recorded group."""
    for owner in state.glob("**/procs/*/owner.json"):
        found = json.loads(owner.read_text())
        if not (owner.parent / "witness.json").exists():
            try:
                os.killpg(int(found["pgid"]), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, KeyError, ValueError):
                continue


def env_of(server: Server, state_home: Path) -> dict[str, str]:
    url, token = server
    return {
        **bare_env(),
        "WATCHKEEPER_URL": url,
        "WATCHKEEPER_TOKEN": token,
        "XDG_STATE_HOME": str(state_home),
    }


def incidents(server: Server, run_id: str) -> list[dict[str, Any]]:
    """The incidents the server's sweep opened on process run ``run_id``."""
    url, token = server
    answer = patient_http.get(
        f"{url}/api/v1/incidents",
        params={"kind": "process", "q": run_id},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    answer.raise_for_status()
    return [found for found in answer.json()["incidents"] if found["run_id"] == run_id]


def test_a_detached_run_from_another_folder_is_recorded_and_judged_on_the_server(
    server: Server, elsewhere: Path, state_home: Path
) -> None:
    env = env_of(server, state_home)
    url = server[0]
    started = wk(
        "run",
        "--detach",
        "--name",
        "nap",
        "--budget",
        "1s",
        "--",
        "sleep",
        "300",
        env=env,
        cwd=elsewhere,
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()

    shown = wk("status", run_id, "--json", env=env, cwd=elsewhere)
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)
    assert (body["name"], body["cwd"], body["budget_s"]) == ("nap", str(elsewhere.resolve()), 1)
    assert body["effective_status"] == "running", body
    listed = wk("ps", "--json", env=env, cwd=elsewhere)
    assert listed.returncode == 0, listed.stderr
    assert run_id in [row["id"] for row in json.loads(listed.stdout)]
    assert list(elsewhere.iterdir()) == [], "run made a store in the folder it was typed in"
    assert f"recorded on {url}" in started.stderr, started.stderr

    # No output within its budget: the server's sweep opens a stalled incident, not a stuck one.
    stalled = wait_for(
        lambda: [i for i in incidents(server, run_id) if i["condition"] == "stalled"],
        what="the server's sweep judging the run stalled",
    )
    assert "no progress" in stalled[0]["reason"]
    assert [i["condition"] for i in incidents(server, run_id)] == ["stalled"]

    # Ended from this host; the server learns how.
    aborted = wk("abort", run_id, "--grace", "1s", env=env, cwd=elsewhere)
    assert aborted.returncode == 0, aborted.stderr
    assert "signaled" in aborted.stdout, aborted.stdout
    waited = wk("wait", run_id, env=env, cwd=elsewhere)
    assert waited.returncode == 128 + signal.SIGTERM, waited.stderr
    ended = json.loads(wk("status", run_id, "--json", env=env, cwd=elsewhere).stdout)
    assert (ended["status"], ended["signal"]) == ("cancelled", signal.SIGTERM)
    assert list(elsewhere.iterdir()) == []


def test_a_foreground_run_ends_on_the_server_with_its_output(
    server: Server, elsewhere: Path, state_home: Path
) -> None:
    env = env_of(server, state_home)
    done = wk("run", "--", "sh", "-c", "echo hi; echo there >&2; exit 3", env=env, cwd=elsewhere)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "hi\nthere\n"
    [row] = json.loads(wk("ps", "--all", "--json", env=env, cwd=elsewhere).stdout)
    assert (row["status"], row["exit_code"], row["cwd"]) == ("failed", 3, str(elsewhere.resolve()))
    logs = wk("logs", row["id"], env=env, cwd=elsewhere)
    assert logs.stdout == "hi\nthere\n", logs.stderr
    assert f"recorded on {server[0]}" in done.stderr
    # A session parks on it, on the same server, and says where it recorded that.
    parked = wk(
        "park",
        "--session",
        "s-1",
        "--until",
        row["id"],
        "--reason",
        "suite",
        env=env,
        cwd=elsewhere,
    )
    assert parked.returncode == 0, parked.stderr
    assert f"recorded on {server[0]}" in parked.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_server_named_but_not_answering_starts_nothing(elsewhere: Path, state_home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    env = {**bare_env(), "WATCHKEEPER_URL": url, "XDG_STATE_HOME": str(state_home)}
    marker = elsewhere / "ran"
    for detach in ((), ("--detach",)):
        refused = wk("run", *detach, "--", "touch", str(marker), env=env, cwd=elsewhere)
        assert refused.returncode == 1, refused.stdout
        assert f"cannot reach watchkeeper at {url} (from WATCHKEEPER_URL)" in " ".join(
            refused.stderr.split()
        )
        assert "Traceback" not in refused.stderr
    assert list(elsewhere.iterdir()) == [], "a run no server records was started"


def test_without_a_server_the_local_store_is_used_and_said(
    elsewhere: Path,
    state_home: Path,
    default_port_refused: bool,  # noqa: F811
) -> None:
    if not default_port_refused:
        pytest.skip("a server answers at the default URL on this machine")
    env = {**bare_env(), "XDG_STATE_HOME": str(state_home)}
    started = wk("run", "--detach", "--", "true", env=env, cwd=elsewhere)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    said = "no server answers at http://127.0.0.1:8750: recorded in ./.watchkeeper"
    assert said in started.stderr, started.stderr
    assert (elsewhere / ".watchkeeper" / "watchkeeper.db").is_file()
    waited = wk("wait", run_id, env=env, cwd=elsewhere)
    assert waited.returncode == 0, waited.stderr
    assert "no server answers at http://127.0.0.1:8750: read from ./.watchkeeper" in waited.stderr
    shown = json.loads(wk("status", run_id, "--json", env=env, cwd=elsewhere).stdout)
    assert shown["status"] == "succeeded"
