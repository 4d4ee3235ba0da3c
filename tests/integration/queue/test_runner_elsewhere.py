"""A runner started with default settings from a folder other than the server's runs its
tasks, and a command that cannot start says why, in the task's outcome and the runner's log."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import WK, cli_env
from tests.support.serving import serving
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.store import Store

EVENT_TIMEOUT_S = 60.0


@pytest.fixture
def served(tmp_path: Path, store: Store) -> Iterator[tuple[str, str]]:
    """``serve`` with a configuration in folder A: only its database, every other default."""
    folder = tmp_path / "a"
    folder.mkdir()
    config = folder / "watchkeeper.toml"
    config.write_text(f"database_url = {store.url!r}\n")
    with serving(config) as (_process, url, token):
        yield url, token


def start_runner(url: str, token: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """``watchkeeper runner`` with no options beyond its fleet, started in ``cwd``."""
    env = cli_env({"WATCHKEEPER_URL": url, "WATCHKEEPER_TOKEN": token})
    env.pop("WATCHKEEPER_CONFIG", None)
    with log.open("wb") as out:
        return subprocess.Popen(
            [*WK, "runner", "--fleet", "b", "--poll-interval", "0.1"],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_a_runner_with_defaults_in_another_folder_runs_tasks_and_says_why_one_cannot_start(
    served: tuple[str, str], tmp_path: Path
) -> None:
    url, admin = served
    elsewhere, log = tmp_path / "b", tmp_path / "runner.log"
    elsewhere.mkdir()
    daemon = start_runner(url, admin, elsewhere, log)
    try:
        with Client(url, admin) as client:
            ok = client.jobs.submit("ok", org="o", fleet="b", argv=["true"])
            missing = client.jobs.submit(
                "missing", org="o", fleet="b", argv=["no-such-program-anywhere"]
            )

            def finished(job: dict[str, object]) -> dict[str, object]:
                found: dict[str, object] = client.jobs.get(str(job["id"]))
                return found if found["status"] in ("succeeded", "failed") else {}

            done = wait_for(lambda: finished(ok), what="the first job", timeout=EVENT_TIMEOUT_S)
            assert done["status"] == "succeeded", done["tasks"]
            failed = wait_for(lambda: finished(missing), what="the second", timeout=EVENT_TIMEOUT_S)
            assert failed["status"] == "failed"
            reason = str(failed["tasks"][0]["failure"]["reason"])  # type: ignore[index]
            assert "no-such-program-anywhere" in reason and "not found" in reason, reason
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=EVENT_TIMEOUT_S)
    output = log.read_text()
    assert "no-such-program-anywhere" in output and "not found" in output, output
    assert (elsewhere / ".watchkeeper" / "runner" / "runner.db").exists()
