"""The SDK against a real server, and the sweep loop judging on the earliest deadline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper import Client
from watchkeeper.errors import ClientError
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for


@pytest.fixture
def looping(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    # A long tick: only the deadline can make the loop judge in time.
    settings = make_settings(tmp_path, store.url, check_interval_s=3600)
    runtime = Runtime.open(settings, store=store, notifier=OpsNotifier(settings.ops))
    with live_server(runtime, run_sweeper=True) as server:
        yield server
    runtime.sweeper.close()


def test_run_context_finishes_on_exit_and_fails_with_the_exception(looping: LiveServer) -> None:
    with Client(looping.url, looping.tokens["reporter"]) as client:
        with client.run("crawl", title="crawl ok", lease_s=600) as run:
            run.progress("page 1")
            run.heartbeat()
        assert run.run_id is not None
        assert client.get_run("crawl", run.run_id)["status"] == "succeeded"

        with pytest.raises(RuntimeError), client.run("crawl", title="crawl bad") as bad:
            raise RuntimeError("robots.txt forbids /private")
        stored = client.get_run("crawl", bad.run_id or "")
        assert stored["status"] == "failed"
        assert stored["failure"]["reason"] == "RuntimeError: robots.txt forbids /private"

        with pytest.raises(ClientError) as caught:
            client.progress("crawl", "never-started")
        assert caught.value.status == 404
        assert "start it first" in caught.value.message


def test_sdk_reports_a_clear_error_when_the_server_is_away() -> None:
    with (
        Client("http://127.0.0.1:9", "wk_x", timeout=2) as client,
        pytest.raises(ClientError) as caught,
    ):
        client.runs()
    assert caught.value.code == "unreachable"
    assert "cannot reach watchkeeper at http://127.0.0.1:9" in str(caught.value)


def test_loop_judges_on_the_deadline_not_the_tick(looping: LiveServer) -> None:
    with Client(looping.url, looping.tokens["admin"]) as client:
        client.start("crawl", "short budget", run_id="deadline-1", budget_s=1, lease_s=600)
        incidents = wait_for(
            lambda: client.incidents.list(status="open"), what="an open incident", timeout=20
        )
    assert [(i["run_id"], i["condition"]) for i in incidents] == [("deadline-1", "stalled")]
    # With a one-hour tick, only the deadline schedule can explain a sweep this soon.
    assert looping.runtime.sweeper.latest is not None
