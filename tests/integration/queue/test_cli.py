"""The queue commands as a user types them, against a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.integration.server import LiveServer, live_server
from watchkeeper.runtime import Runtime


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def wk(server: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "WATCHKEEPER_URL": server.url,
           "WATCHKEEPER_TOKEN": server.tokens["admin"]}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "watchkeeper", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_submit_list_show_cancel_retry_delete(server: LiveServer) -> None:
    submitted = wk(server, "submit", "--fleet", "gpu", "--org", "acme", "--", "echo", "hi")
    assert submitted.returncode == 0, submitted.stderr
    job_id, why = submitted.stdout.splitlines()
    assert why.startswith("queued: no_runner: 0/0 runners serve fleet gpu")
    listed = wk(server, "jobs", "--status", "queued")
    assert job_id in listed.stdout and "no_runner" in listed.stdout
    as_json = json.loads(wk(server, "jobs", "--fleet", "gpu", "--json").stdout)
    assert [job["id"] for job in as_json] == [job_id]
    shown = wk(server, "job", job_id)
    assert "echo hi" in shown.stdout and "no_runner" in shown.stdout and "queued" in shown.stdout
    assert wk(server, "cancel", job_id).stdout.strip() == f"cancelled 1 task of job {job_id}"
    assert wk(server, "cancel", job_id).stdout.strip() == f"cancelled 0 tasks of job {job_id}"
    assert wk(server, "retry", job_id).stdout.strip() == f"queued again 1 task of job {job_id}"
    deleted = json.loads(wk(server, "delete", job_id, "--json").stdout)
    assert deleted["affected"] == 1
    missing = wk(server, "job", job_id)
    assert missing.returncode == 1 and f"no job '{job_id}'" in missing.stderr
    assert "Traceback" not in missing.stderr
    runners = wk(server, "runners")
    assert runners.returncode == 0 and "Runners (0)" in runners.stdout
