"""The same surfaces over HTTP and the SDK: start on the server's host, wait, abort, park."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper import Client
from watchkeeper.clock import utcnow
from watchkeeper.errors import ClientError
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.live_server import LiveServer, live_server
from .conftest import kill_leftovers


@pytest.fixture
def served(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, store=store, clock=utcnow, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as server:
        yield server
    runtime.sweeper.close()
    kill_leftovers(ProcEngine(store, settings.data_dir))


def test_start_wait_and_read_a_run_from_python(served: LiveServer, tmp_path: Path) -> None:
    with Client(served.url, served.tokens["admin"]) as client:
        run = client.procs.start(
            ["sh", "-c", "echo hello; echo password=hunter2; exit 0"], cwd=str(tmp_path)
        )
        done = client.procs.wait(run["id"], timeout_s=30)
        assert (done["status"], done["exit_code"]) == ("succeeded", 0)
        text = client.procs.log(run["id"])
        assert "hello" in text and "hunter2" not in text
        assert [r["id"] for r in client.procs.list(all=True)] == [run["id"]]


def test_abort_and_progress_over_the_api(served: LiveServer) -> None:
    with Client(served.url, served.tokens["admin"]) as admin:
        run = admin.procs.start(["sleep", "120"], name="long")
        admin.procs.progress(run["id"], "warming up")
        # `watchkeeper report progress process` goes through the push-style route.
        moved = admin.progress("process", run["id"], "step two")
        assert moved["step"] == "step two"
        aborted = admin.procs.abort(run["id"], grace_s=1)
        assert aborted["outcome"] == "signaled"
        assert aborted["run"]["status"] == "cancelled"
        assert admin.procs.abort(run["id"])["outcome"] == "already_exited"


def test_bad_requests_get_clear_answers(served: LiveServer) -> None:
    with Client(served.url, served.tokens["admin"]) as admin:
        with pytest.raises(ClientError, match="not found on PATH") as missing:
            admin.procs.start(["no-such-command-here"])
        assert missing.value.status == 422
        with pytest.raises(ClientError, match="detached runs only"):
            admin.procs.start(["true"], detach=False)
        with pytest.raises(ClientError, match="no process run 'p-unknown'") as unknown:
            admin.procs.abort("p-unknown")
        assert unknown.value.status == 404
        assert admin.procs.list(all=True) == []
    with Client(served.url, served.tokens["reporter"]) as reporter:
        with pytest.raises(ClientError) as refused:
            reporter.procs.start(["true"])
        assert refused.value.status == 403


def test_park_over_the_api(served: LiveServer) -> None:
    with Client(served.url, served.tokens["admin"]) as admin:
        run = admin.procs.start(["true"])
        admin.procs.wait(run["id"], timeout_s=30)
    with Client(served.url, served.tokens["reporter"]) as reporter:
        parked = reporter.procs.park("agent-7", run["id"], "waiting for suite")
        assert parked["state"] == "waiting"
        with pytest.raises(ClientError, match="needs an admin token"):
            reporter.procs.park("agent-7", run["id"], "again", wake_cmd="true")
        [shown] = reporter.procs.parked()
        assert (shown["session"], shown["until"], shown["wakeable"]) == ("agent-7", run["id"], True)
        assert reporter.procs.session_progress("agent-7", "moved")["released"] == 0
