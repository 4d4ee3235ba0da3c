"""Jobs from GitHub through the API, the SDK and the command line, and a real ``watchkeeper
serve`` killed between claiming a job's end and GitHub's answer: never posted twice."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.support.cli import WK, cli_env, wk
from tests.support.fake_github import TOKEN, FakeGitHub, fake_github
from tests.support.live_server import LiveServer, free_port, live_server
from tests.support.serving import healthy
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock, utcnow
from watchkeeper.errors import ClientError
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.queue.service import QueueService
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role

from .test_github_results import ISSUE, ORIGIN, PUBLIC, forge_of

START_TIMEOUT_S = 60.0


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with fake_github() as fake:
        yield fake


@pytest.fixture
def server(tmp_path: Path, store: Store, github: FakeGitHub) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, store.url, forge=forge_of(github))
    runtime = Runtime.open(settings, clock=utcnow, store=store, notifier=OpsNotifier(settings.ops))
    try:
        with live_server(runtime) as live:
            yield live
    finally:
        runtime.sweeper.close()


def test_the_api_and_the_sdk_take_an_origin_and_refuse_a_malformed_one(
    server: LiveServer, github: FakeGitHub
) -> None:
    with Client(server.url, server.tokens["admin"]) as client:
        job = client.jobs.submit("fix", org="o", fleet="cpu", argv=["make"], origin=ORIGIN)
        assert job["origin"] == ORIGIN
        assert client.jobs.get(job["id"])["origin"] == ORIGIN
        assert github.labels_on(ISSUE) == {"watchkeeper:waiting"}
        with pytest.raises(ClientError) as refused:
            client.jobs.submit("fix", org="o", fleet="cpu", argv=["make"], origin="acme/app#42")
    assert refused.value.status == 422
    assert "github:OWNER/REPO#N" in refused.value.message


def test_the_command_line_submits_with_an_origin_and_refuses_a_malformed_one(
    server: LiveServer, github: FakeGitHub
) -> None:
    env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["admin"]}
    ran = wk(
        "submit",
        "--fleet",
        "cpu",
        "--org",
        "o",
        "--origin",
        ORIGIN,
        "--json",
        "--",
        "make",
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    assert f'"origin": "{ORIGIN}"' in ran.stdout
    assert github.labels_on(ISSUE) == {"watchkeeper:waiting"}
    refused = wk(
        "submit", "--fleet", "cpu", "--org", "o", "--origin", "github:acme#4", "--", "make", env=env
    )
    assert refused.returncode != 0
    assert "github:OWNER/REPO#N" in refused.stderr and "Traceback" not in refused.stderr


class Served:
    """``watchkeeper serve`` as its own process, started again after it is killed."""

    def __init__(self, folder: Path, store: Store, github: FakeGitHub) -> None:
        self.config = folder / "watchkeeper.toml"
        self.config.write_text(
            f'data_dir = "{folder / "data"}"\n'
            f'database_url = "{store.url}"\n'
            "check_interval_s = 0.3\n"
            "[forge]\n"
            f'github_token = "{TOKEN}"\n'
            f'github_api_url = "{github.url}"\n'
            f'public_url = "{PUBLIC}"\n'
        )
        self.log = folder / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*WK, "--config", str(self.config), "serve", "--port", str(port)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=cli_env({"PYTHONUNBUFFERED": "1"}),
            )

        def answering() -> bool:
            assert self.process is not None and self.process.poll() is None, self.log.read_text()
            return healthy(self.url)

        wait_for(answering, what="watchkeeper serve answering", timeout=START_TIMEOUT_S)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=START_TIMEOUT_S)


def _run_to_the_end(client: Client, reporter: Client, origin: str) -> str:
    """Submit a job from ``origin``; a runner of its own takes it, ships its tail and ends it."""
    job = client.jobs.submit("fix", org="o", fleet="cpu", argv=["make"], origin=origin)
    runner = reporter.runners.register("cpu", capacity=1, host="h", pid=7)
    [task] = reporter.runners.lease(runner["id"])
    reporter.runners.output(task["id"], task["lease_token"], "built\nall green\n")
    reporter.runners.complete(task["id"], task["lease_token"])
    reporter.runners.stop(runner["id"])
    return str(job["id"])


def test_a_server_killed_between_claim_and_answer_never_posts_that_end_again(
    tmp_path: Path, store: Store, github: FakeGitHub
) -> None:
    now = utcnow()
    admin = store.tokens.create(Role.ADMIN, "admin", now)[1]
    runner_token = store.tokens.create(Role.REPORTER, "runner", now)[1]
    served = Served(tmp_path, store, github)
    github.hold_comments = True  # the first comment is taken, its answer never comes
    served.start()
    try:
        with Client(served.url, admin) as client, Client(served.url, runner_token) as reporter:
            first = _run_to_the_end(client, reporter, ORIGIN)
        assert github.held.wait(START_TIMEOUT_S), served.log.read_text()
        served.kill()  # between the claim and GitHub's answer
        github.hold_comments = False
        github.release.set()
        served.start()
        with Client(served.url, admin) as client, Client(served.url, runner_token) as reporter:
            second = _run_to_the_end(client, reporter, "github:acme/app#43")
        wait_for(lambda: github.comments_on("acme/app#43"), what="the second job's comment")
        wait_for(lambda: github.labels_on("acme/app#43") == {"watchkeeper:ready"})
    finally:
        served.kill()
    [comment] = github.comments_on(ISSUE)
    assert first in comment
    assert second in github.comments_on("acme/app#43")[0]
    # The restarted server swept past the first job: still claimed, never posted again.
    queue = QueueService(store, make_settings(tmp_path, store.url, forge=forge_of(github)))
    assert queue.results.state(first) == "firing"
    later = ManualClock(utcnow() + timedelta(seconds=queue.results.stale_after_s + 1))
    stale = QueueService(
        store, make_settings(tmp_path, store.url, forge=forge_of(github)), clock=later
    )
    stale.sweep(later())
    assert stale.results.state(first) == "maybe_fired"
    assert len(github.comments_on(ISSUE)) == 1
    assert github.labels_on(ISSUE) == {"watchkeeper:waiting"}  # maybe posted: left as it is
