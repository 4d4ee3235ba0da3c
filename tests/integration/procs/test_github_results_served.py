"""A process run started through the server from a GitHub pull request or issue posts its
end there with the server's ``[forge]``; its cards go where cards of runs without an
origin go, never to GitHub."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper import Client
from watchkeeper.clock import utcnow
from watchkeeper.errors import ClientError
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.notify.router import Router
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident, IncidentKey, IncidentStatus

from ...conftest import make_settings
from ...support.fake_github import TOKEN, FakeGitHub, fake_github
from ...support.live_server import LiveServer, live_server
from .conftest import kill_leftovers

ISSUE = "acme/app#42"
ORIGIN = {"platform": "github", "chat_id": "acme/app", "thread_id": "42"}
PUBLIC = "https://wk.example.test"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with fake_github() as fake:
        yield fake


@pytest.fixture
def served(tmp_path: Path, store: Store, github: FakeGitHub) -> Iterator[LiveServer]:
    forge = {"github_token": TOKEN, "github_api_url": github.url, "public_url": PUBLIC}
    settings = make_settings(tmp_path, store.url, forge=forge)
    runtime = Runtime.open(settings, store=store, clock=utcnow, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as server:
        yield server
    runtime.sweeper.close()
    kill_leftovers(ProcEngine(store, settings.data_dir))


def test_a_run_started_through_the_server_posts_its_end_on_github_once(
    served: LiveServer, github: FakeGitHub, tmp_path: Path
) -> None:
    script = "echo building; echo token=ghp_abcdefghijklmnopqrstuvwxyz0123456789; exit 0"
    with Client(served.url, served.tokens["admin"]) as client:
        run = client.procs.start(["sh", "-c", script], cwd=str(tmp_path), origin=ORIGIN)
        assert github.labels_on(ISSUE) == {"watchkeeper:waiting"}
        client.procs.wait(run["id"], timeout_s=30)
    served.runtime.procs.reap()
    served.runtime.procs.reap()
    [comment] = github.comments_on(ISSUE)
    assert "succeeded" in comment and "building" in comment
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in comment
    assert f"{PUBLIC}/web/procs/{run['id']}" in comment
    assert github.labels_on(ISSUE) == {"watchkeeper:ready"}


def test_a_malformed_github_origin_is_refused_saying_how_to_write_it(
    served: LiveServer, github: FakeGitHub
) -> None:
    with Client(served.url, served.tokens["admin"]) as client:
        for wrong in (
            {"platform": "github", "chat_id": "acme", "thread_id": "42"},
            {"platform": "github", "chat_id": "acme/app"},
        ):
            with pytest.raises(ClientError) as refused:
                client.procs.start(["true"], origin=wrong)
            assert refused.value.status == 422
            assert "OWNER/REPO" in refused.value.message
    assert github.calls == []


def test_a_push_run_from_github_keeps_its_origin_and_its_cards_go_to_the_ops_channels(
    served: LiveServer, tmp_path: Path
) -> None:
    with Client(served.url, served.tokens["reporter"]) as client:
        run = client.start("crawl", "from a pull request", origin=ORIGIN)
        with pytest.raises(ClientError) as refused:
            client.start("crawl", "no number", origin={"platform": "github", "chat_id": "a/b"})
    assert run["origin"] == ORIGIN
    assert refused.value.status == 422
    settings = make_settings(tmp_path, served.runtime.store.url, ops={"channels": ["slack:C-ops"]})
    router = Router(served.runtime.store, served.runtime.decider, settings.ops, {}, ["slack"])
    now = utcnow()
    key = IncidentKey("crawl", str(run["run_id"]), "stalled")
    incident = Incident(
        1,
        key,
        IncidentStatus.OPEN,
        "from a pull request",
        "stalled",
        now,
        now,
        now,
        None,
        None,
        "s1",
        run["origin"],
        "unknown",
        1,
    )
    [target] = router.targets(incident)
    assert (target.channel, target.chat_id) == ("slack", "C-ops")
