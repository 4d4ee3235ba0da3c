"""The process commands talk to the server by default; a local store only with ``--store``.

Every command runs as a real subprocess from an empty folder with no
``WATCHKEEPER_*`` settings but the server's URL and token, so the only place
the runs can be found is the ``watchkeeper serve`` started here.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import patient_http

from ..support.cli import WK, cli_env, wk
from ..support.live_server import free_port
from ..support.serving import serving
from .test_cli_finds_server import bare_env

SECRET = "SECRETVALUE123"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "server-data"


@pytest.fixture
def server(tmp_path: Path, data_dir: Path) -> Iterator[tuple[str, str]]:
    """A real ``serve`` on a fresh data folder: its URL and first admin token."""
    config = tmp_path / "server.toml"
    config.write_text(f'data_dir = "{data_dir}"\ncheck_interval_s = 1\n')
    with serving(config) as (_process, url, token):
        yield url, token


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


def client_env(server: tuple[str, str]) -> dict[str, str]:
    url, token = server
    return {**bare_env(), "WATCHKEEPER_URL": url, "WATCHKEEPER_TOKEN": token}


def start(server: tuple[str, str], *argv: str, name: str | None = None) -> str:
    """Start ``argv`` detached on the server's host with ``run --server``; its run id."""
    url, token = server
    named = ("--name", name) if name else ()
    started = wk(
        "run", "--server", url, "--token", token, "--detach", *named, "--", *argv, env=bare_env()
    )
    assert started.returncode == 0, started.stderr
    return started.stdout.strip()


def test_every_process_command_works_over_the_server(
    server: tuple[str, str], elsewhere: Path
) -> None:
    env = client_env(server)
    run_id = start(server, "sh", "-c", "echo hi; exit 3", name="quick")
    waited = wk("wait", run_id, env=env, cwd=elsewhere)
    assert waited.returncode == 3, waited.stderr
    assert "exited with status 3" in waited.stdout
    assert wk("logs", run_id, env=env, cwd=elsewhere).stdout == "hi\n"
    shown = wk("status", run_id, env=env, cwd=elsewhere)
    assert shown.returncode == 0, shown.stderr
    assert "failed" in shown.stdout and "quick" in shown.stdout
    as_json = json.loads(wk("status", run_id, "--json", env=env, cwd=elsewhere).stdout)
    assert as_json["effective_status"] == "failed" and as_json["exit_code"] == 3
    listed = wk("ps", "--all", env=env, cwd=elsewhere)
    assert run_id in listed.stdout, listed.stderr
    assert [row["id"] for row in json.loads(wk("ps", "--all", "--json", env=env).stdout)] == [
        run_id
    ]
    aborted = wk("abort", run_id, env=env, cwd=elsewhere)
    assert "already_exited" in aborted.stdout, aborted.stderr
    aborted_json = json.loads(wk("abort", run_id, "--json", env=env).stdout)
    assert aborted_json["outcome"] == "already_exited" and aborted_json["status"] == "failed"
    assert "reclaimed: none" in wk("reclaim", env=env, cwd=elsewhere).stdout
    parked = wk("park", "--session", "s-1", "--until", run_id, "--reason", "suite", env=env)
    assert parked.returncode == 0, parked.stderr
    assert f"parked s-1 until {run_id}" in parked.stdout
    shown_parks = wk("parked", env=env, cwd=elsewhere)
    assert "s-1" in shown_parks.stdout and run_id in shown_parks.stdout
    assert list(elsewhere.iterdir()) == [], "a command over the server created files here"


def test_wait_over_the_server_gives_up_after_its_timeout(server: tuple[str, str]) -> None:
    env = client_env(server)
    run_id = start(server, "sleep", "300")
    waited = wk("wait", run_id, "--timeout", "1s", env=env)
    assert waited.returncode == 1
    assert f"process run {run_id} is still running after 1s" in waited.stderr
    aborted = wk("abort", run_id, "--grace", "1s", env=env)
    assert "signaled" in aborted.stdout, aborted.stderr
    assert wk("wait", run_id, env=env).returncode == 128 + 15


def test_store_reads_the_local_store_and_shows_the_same(
    server: tuple[str, str], data_dir: Path, elsewhere: Path
) -> None:
    env = client_env(server)
    run_id = start(server, "sh", "-c", "echo local; exit 0")
    assert wk("wait", run_id, env=env).returncode == 0
    store = ("--store", str(data_dir))
    # No server named: --store alone says where to look.
    local = wk("status", run_id, "--json", *store, env=bare_env(), cwd=elsewhere)
    assert local.returncode == 0, local.stderr
    remote = wk("status", run_id, "--json", env=env, cwd=elsewhere)
    assert json.loads(local.stdout) == json.loads(remote.stdout)
    listed_local = json.loads(wk("ps", "--all", "--json", *store, env=bare_env()).stdout)
    listed_remote = json.loads(wk("ps", "--all", "--json", env=env).stdout)
    assert listed_local == listed_remote
    assert wk("logs", run_id, *store, env=bare_env()).stdout == "local\n"
    assert wk("wait", run_id, *store, env=bare_env()).returncode == 0
    missing = elsewhere / "no-such-data"
    refused = wk("ps", "--store", str(missing), env=bare_env(), cwd=elsewhere)
    assert refused.returncode != 0
    assert f"no watchkeeper store at {missing}" in " ".join(refused.stderr.split())
    assert not missing.exists()


def _read_until(process: subprocess.Popen[bytes], wanted: bytes, timeout: float) -> bytes:
    """What ``process`` printed until ``wanted`` appeared (fails at the deadline)."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{wanted!r} never came; saw {seen!r}"
        if selector.select(left):
            chunk = os.read(process.stdout.fileno(), 65536)
            assert chunk, f"the follower ended before {wanted!r}; saw {seen!r}"
            seen += chunk
    return seen


def test_logs_follow_reads_by_offset_and_never_splits_a_secret(
    server: tuple[str, str], tmp_path: Path
) -> None:
    url, token = server
    go = tmp_path / "go"
    # The secret's line is written in two pieces, the second only once the follower
    # has printed the first line (so it has read past the unfinished one).
    script = (
        f"printf 'first line\\napi_key='; while [ ! -e {go} ]; do sleep 0.05; done; "
        f"printf '{SECRET}\\nlast line\\n'"
    )
    run_id = start(server, "sh", "-c", script)
    follower = subprocess.Popen(
        [*WK, "logs", "--follow", run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(client_env(server)),
    )
    try:
        seen = _read_until(follower, b"first line\n", timeout=30)
        headers = {"Authorization": f"Bearer {token}"}
        piece = patient_http.get(
            f"{url}/api/v1/procs/{run_id}/log", params={"offset": 0}, headers=headers
        ).json()
        # While the run goes on, a piece ends at the last complete line.
        assert piece["text"] == "first line\n" and piece["next_offset"] == len("first line\n")
        assert piece["size"] > piece["next_offset"]
        go.touch()
        rest, errors = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0, errors
    printed = (seen + rest).decode()
    assert SECRET not in printed
    assert printed == "first line\napi_key=[redacted]\nlast line\n"
    # The old way to ask still gives the end of the log.
    tail = patient_http.get(
        f"{url}/api/v1/procs/{run_id}/log", params={"tail_bytes": 10}, headers=headers
    ).json()
    assert tail["text"] == "last line\n"


def test_run_with_server_runs_there_in_the_foreground(
    server: tuple[str, str], data_dir: Path, tmp_path: Path, elsewhere: Path
) -> None:
    url, token = server
    foreground = wk(
        "run",
        "--server",
        url,
        "--token",
        token,
        "--",
        "sh",
        "-c",
        "echo out; echo more; exit 7",
        env=bare_env(),
        cwd=elsewhere,
    )
    assert foreground.returncode == 7, foreground.stderr
    assert foreground.stdout == "out\nmore\n"
    listed = json.loads(wk("ps", "--all", "--json", env=client_env(server)).stdout)
    assert [row["exit_code"] for row in listed] == [7]
    # The URL from the environment does not send work to another host: `run` starts it here,
    # in the folder it was typed in, and records it on that server, where `ps` finds it.
    local_data = tmp_path / "local-data"
    config = tmp_path / "local.toml"
    config.write_text(f'data_dir = "{local_data}"\n')
    env = {**client_env(server), "XDG_STATE_HOME": str(tmp_path / "state")}
    here = wk("--config", str(config), "run", "--", "sh", "-c", "exit 4", env=env, cwd=elsewhere)
    assert here.returncode == 4, here.stderr
    listed = json.loads(wk("ps", "--all", "--json", env=client_env(server)).stdout)
    assert [row["exit_code"] for row in listed] == [4, 7]
    assert listed[0]["cwd"] == str(elsewhere.resolve())
    assert not local_data.exists() and list(elsewhere.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ("ps",),
        ("status", "p-1"),
        ("logs", "p-1"),
        ("logs", "--follow", "p-1"),
        ("wait", "p-1"),
        ("abort", "p-1"),
        ("reclaim",),
        ("park", "--session", "s", "--until", "p-1", "--reason", "r"),
        ("parked",),
        ("run", "--detach", "--server", "{url}", "--", "true"),
    ],
    ids=lambda a: " ".join(a),
)
def test_no_server_answering_is_said_plainly(args: tuple[str, ...], elsewhere: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    named = [arg.format(url=url) for arg in args]
    if "--server" not in named:
        named += ["--server", url]
    result = wk(*named, env=bare_env(), cwd=elsewhere)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())
    assert f"cannot reach watchkeeper at {url} (from --server)" in said
    assert list(elsewhere.iterdir()) == []


def test_a_secret_across_the_piece_limit_is_redacted_whole(server: tuple[str, str]) -> None:
    # 1 MiB is the most one piece holds; the secret's line straddles that byte.
    filler = "a" * 99 + "\n"
    before = filler * 10485 + "b" * 59 + "\n"
    assert len(before) < 1024 * 1024 < len(before) + len(f"api_key={SECRET}")
    script = (
        "import sys; sys.stdout.write(('a' * 99 + '\\n') * 10485 + 'b' * 59 + '\\n'"
        f" + 'api_key={SECRET}\\nend\\n')"
    )
    run_id = start(server, sys.executable, "-c", script)
    assert wk("wait", run_id, env=client_env(server)).returncode == 0
    printed = wk("logs", run_id, env=client_env(server)).stdout
    assert printed == before + "api_key=[redacted]\nend\n"
