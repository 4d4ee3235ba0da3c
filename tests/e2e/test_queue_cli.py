"""The queue commands as a user types them, against a real server."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.cli import wk
from tests.support.live_server import LiveServer, live_server
from watchkeeper.runtime import Runtime


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def wk_as_admin(server: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["admin"]}
    return wk(*args, env=env, columns=250)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_submit_list_show_cancel_retry_delete(server: LiveServer) -> None:
    submitted = wk_as_admin(server, "submit", "--fleet", "gpu", "--org", "acme", "--", "echo", "hi")
    assert submitted.returncode == 0, submitted.stderr
    job_id, why = submitted.stdout.splitlines()
    assert why.startswith("queued: no_runner: 0/0 runners serve fleet gpu")
    listed = wk_as_admin(server, "jobs", "--status", "queued")
    assert job_id in listed.stdout and "no_runner" in listed.stdout
    as_json = json.loads(wk_as_admin(server, "jobs", "--fleet", "gpu", "--json").stdout)
    assert [job["id"] for job in as_json] == [job_id]
    shown = wk_as_admin(server, "job", job_id)
    assert "echo hi" in shown.stdout and "no_runner" in shown.stdout and "queued" in shown.stdout
    assert (
        wk_as_admin(server, "cancel", job_id).stdout.strip() == f"cancelled 1 task of job {job_id}"
    )
    assert (
        wk_as_admin(server, "cancel", job_id).stdout.strip() == f"cancelled 0 tasks of job {job_id}"
    )
    assert (
        wk_as_admin(server, "retry", job_id).stdout.strip()
        == f"queued again 1 task of job {job_id}"
    )
    deleted = json.loads(wk_as_admin(server, "delete", job_id, "--json").stdout)
    assert deleted["affected"] == 1
    missing = wk_as_admin(server, "job", job_id)
    assert missing.returncode == 1 and f"no job '{job_id}'" in missing.stderr
    assert "Traceback" not in missing.stderr
    runners = wk_as_admin(server, "runners")
    assert runners.returncode == 0 and "Runners (0)" in runners.stdout
