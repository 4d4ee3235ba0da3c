"""The basics a newcomer expects of the command line, each run as a user runs it."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import pty
import select
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import WK, cli_env, wk
from tests.support.live_server import LiveServer, live_server
from tests.support.tcp_proxy import tcp_proxy
from tests.support.waiting import wait_for
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.runtime import Runtime


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def admin_env(server: LiveServer) -> dict[str, str]:
    return {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["admin"]}


def test_version_names_the_installed_release() -> None:
    done = wk("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"watchkeeper {importlib.metadata.version('watchkeeper')}"


def test_shell_completion_is_offered() -> None:
    # Typer guesses the shell from the parent process (`sh` under make, which it cannot
    # serve); its documented switch lets the shell be named instead.
    named = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = wk("--show-completion", "bash", env=named)
    assert shown.returncode == 0, shown.stderr
    assert "_WATCHKEEPER_COMPLETE" in shown.stdout
    assert "--install-completion" in wk("--help").stdout


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("command", ["job", "cancel", "retry", "delete"])
def test_a_malformed_job_id_is_no_such_job(server: LiveServer, command: str) -> None:
    done = wk(command, "not a job id!", env=admin_env(server))
    assert done.returncode == 1
    assert "no job 'not a job id!'" in done.stderr
    assert "watchkeeper jobs" in done.stderr
    assert "pattern" not in done.stderr and "^" not in done.stderr


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_malformed_task_id_is_no_such_task(server: LiveServer) -> None:
    done = wk("task", "output", "../x", env=admin_env(server))
    assert done.returncode == 1
    assert "no task '../x'" in done.stderr
    assert "pattern" not in done.stderr


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_errors_name_commands_not_api_paths(server: LiveServer) -> None:
    missing = wk("silence", "expire", "4242", env=admin_env(server))
    assert missing.returncode == 1
    assert "no silence 4242" in missing.stderr
    assert "`watchkeeper silence list`" in missing.stderr
    assert "/api/" not in missing.stderr
    unknown = wk("diagnose", "4242", env=admin_env(server))
    assert unknown.returncode == 1
    assert "no incident 4242" in unknown.stderr
    assert "`watchkeeper incidents`" in unknown.stderr
    assert "/api/" not in unknown.stderr


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_piped_output_keeps_long_lines_whole(server: LiveServer) -> None:
    words = ["echo", *(f"word{i:03d}" for i in range(40))]
    submitted = wk("submit", "--fleet", "f", "--org", "o", "--", *words, env=admin_env(server))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.splitlines()[0]
    env = cli_env(admin_env(server))
    env.pop("COLUMNS")  # as a pipe into grep or a file sees it: no terminal, no width
    env.pop("LINES", None)
    shown = subprocess.run(
        [*WK, "job", job_id], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert shown.returncode == 0, shown.stderr
    command_lines = [line for line in shown.stdout.splitlines() if "command" in line]
    assert len(command_lines) == 1
    assert command_lines[0].rstrip().endswith("word039")
    assert len(command_lines[0]) > 80


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_runner_logs_no_line_per_poll(server: LiveServer, tmp_path: Path) -> None:
    runner = subprocess.Popen(
        [*WK, "runner", "--fleet", "f", "--poll-interval", "0.01", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(admin_env(server)),
    )
    try:
        submitted = wk(
            "submit", "--fleet", "f", "--org", "o", "--json", "--", "true", env=admin_env(server)
        )
        job_id = json.loads(submitted.stdout)["id"]

        def finished() -> bool:
            shown = json.loads(wk("job", job_id, "--json", env=admin_env(server)).stdout)
            return bool(shown["status"] == "succeeded")

        wait_for(finished, what="the runner to run the job")
    finally:
        runner.send_signal(signal.SIGTERM)
        _, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 0, stderr
    assert "/lease" not in stderr
    assert "HTTP Request" not in stderr
    # What a runner's log tells: it serves, and what each task did; not the local store's set-up.
    assert "alembic" not in stderr
    assert "serves fleet f" in stderr


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_runs_watch_shows_the_list_again_until_ctrl_c(server: LiveServer) -> None:
    watching = subprocess.Popen(
        [*WK, "runs", "--watch", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(admin_env(server)),
    )
    assert watching.stdout is not None
    try:
        shown = 0
        for line in watching.stdout:
            shown += line.startswith("Needs attention (0)")
            if shown == 3:
                break
        assert shown == 3, watching.stderr.read() if watching.stderr else ""
    finally:
        watching.send_signal(signal.SIGINT)
        _, stderr = watching.communicate(timeout=60)
    assert watching.returncode == 0, stderr
    assert "aborted" not in stderr


@pytest.mark.parametrize("way", ["server", "store"])
def test_wait_on_a_terminal_shows_the_last_step_and_its_age(
    engine: ProcEngine, server: LiveServer, tmp_path: Path, way: str
) -> None:
    # Over the server by default; the run's own store with --store.
    env = admin_env(server) if way == "server" else {}
    config = tmp_path / "watchkeeper.toml"
    local = way == "store"
    named = ("--config", str(config)) if local else ()
    store = ("--store", engine.store.url) if local else ()
    config.write_text(f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n')
    gate = tmp_path / "go"
    held = f'while [ ! -e "{gate}" ]; do sleep 0.05; done'
    started = wk("--config", str(config), "run", "--detach", "--", "sh", "-c", held)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    engine.progress(run_id, "copying shard 3 of 9")
    primary, secondary = pty.openpty()
    waiting = subprocess.Popen(
        [*WK, *named, "wait", run_id, *store],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=cli_env({"TERM": "xterm", **env}),
    )
    os.close(secondary)
    seen = bytearray()

    def read_some() -> bytes:
        if select.select([primary], [], [], 0.1)[0]:
            with contextlib.suppress(OSError):  # EIO: the terminal's other end closed
                seen.extend(os.read(primary, 65536))
        return bytes(seen)

    try:
        shown = wait_for(
            lambda: b"copying shard 3 of 9" in read_some() and b" ago" in seen,
            what="the spinner to show the run's step and age",
        )
        assert shown
        assert run_id.encode() in seen
    finally:
        gate.touch()
        assert waiting.wait(timeout=60) == 0
        os.close(primary)
    piped = wk(*named, "wait", run_id, *store, env=env)
    assert piped.returncode == 0
    assert "copying shard" not in piped.stdout + piped.stderr  # no spinner into a pipe


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_runner_tells_an_outage_once_not_at_every_poll(
    server: LiveServer, tmp_path: Path
) -> None:
    port = int(server.url.rstrip("/").rsplit(":", 1)[1])
    lines: list[str] = []
    with tcp_proxy(("127.0.0.1", port)) as proxy:
        env = {**admin_env(server), "WATCHKEEPER_URL": f"http://127.0.0.1:{proxy.port}"}
        runner = subprocess.Popen(
            [
                *WK,
                "runner",
                "--fleet",
                "f",
                "--data-dir",
                str(tmp_path),
                "--poll-interval",
                "0.01",
                "--heartbeat-interval",
                "0.05",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(env),
        )
        assert runner.stderr is not None
        reader = threading.Thread(target=lambda: lines.extend(runner.stderr or ()), daemon=True)
        reader.start()

        def told(text: str) -> bool:
            return any(text in line for line in list(lines))

        try:
            wait_for(lambda: told("serves fleet f"), what="the runner to register")
            proxy.cut()
            wait_for(
                lambda: told("Leasing failed") and told("Heartbeat failed"),
                what="the runner to see the server gone",
            )
            proxy.restore()
            wait_for(
                lambda: told("Leasing works again") and told("Heartbeat works again"),
                what="the runner to see the server back",
            )
        finally:
            runner.send_signal(signal.SIGTERM)
            runner.wait(timeout=60)
            reader.join(timeout=60)
            runner.stderr.close()
    assert runner.returncode == 0, "".join(lines)
    assert sum("Leasing failed" in line for line in lines) == 1, "".join(lines)
    assert sum("Heartbeat failed" in line for line in lines) == 1, "".join(lines)
