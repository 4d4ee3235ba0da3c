"""A merge link names who approved the pull request, read from GitHub's reviews API.

GitHub's ``pull_request`` delivery says who merged, not who approved. With ``[forge]
github_token_env`` set, the merge link asks ``GET /repos/{repo}/pulls/{n}/reviews`` (a
local server here that speaks that API: bearer token, pages linked by ``Link``) and keeps
each reviewer's last deciding review: approved, changes requested, or dismissed. The
approvers are part of the signed link.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.queue.conftest import make_service, submit
from tests.integration.timeline.test_webhooks import GITHUB_SECRET, _github, _merged, serving
from tests.support.json_server import JsonHandler, JsonServer, answering
from tests.support.live_server import LiveServer
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.store import Store
from watchkeeper.timeline import record

TOKEN = "ghp_test_reviews_token"
SIGNED = {"github_secret": GITHUB_SECRET}
#: PR 42's reviews, oldest first, over two pages.
REVIEWS = [
    {"id": 1, "user": {"login": "alice"}, "state": "CHANGES_REQUESTED"},
    {"id": 2, "user": {"login": "bob"}, "state": "APPROVED"},
    {"id": 3, "user": {"login": "carol"}, "state": "COMMENTED"},
    {"id": 4, "user": {"login": "alice"}, "state": "APPROVED"},
    {"id": 5, "user": {"login": "bob"}, "state": "COMMENTED"},  # bob's approval stands
    {"id": 6, "user": {"login": "dave"}, "state": "APPROVED"},
    {"id": 7, "user": {"login": "dave"}, "state": "DISMISSED"},  # dave's does not
]


class FakeGitHub(JsonServer):
    """``GET /repos/acme/app/pulls/42/reviews`` in pages of 4, behind a bearer token."""

    asked: list[str]


class _Reviews(JsonHandler):
    server: FakeGitHub

    def do_GET(self) -> None:
        self.server.asked.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_json(401, {"message": "Bad credentials"})
            return
        path, _, query = self.path.partition("?")
        if path != "/repos/acme/app/pulls/42/reviews":
            self.send_json(404, {"message": "Not Found"})
            return
        page = int(dict(p.split("=") for p in query.split("&") if p).get("page", "1"))
        links = {}
        if page == 1:
            links["Link"] = f'<{self.server.url}{path}?per_page=4&page=2>; rel="next"'
        self.send_json(200, REVIEWS[(page - 1) * 4 : page * 4], links)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(("127.0.0.1", 0), _Reviews)
    fake.asked = []
    with answering(fake):
        yield fake


def _merge_link(server: LiveServer, queue: QueueService) -> dict[str, Any]:
    job = submit(queue)
    answer = _github(server, _merged(f"Closes wk-job:{job.id}"))
    assert answer.status_code == 200, answer.text
    queue.cancel(job.id)
    with Client(server.url, server.tokens["viewer"]) as viewer:
        signed = viewer.timeline.record(job.id)
    keys = record.load_keys(server.runtime.settings)
    assert record.verify(json.dumps(signed).encode(), keys.public_key).valid
    (link,) = signed["links"]
    detail: dict[str, Any] = link["detail"]
    return detail


@pytest.fixture
def queue(tmp_path: Path, store: Store, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, store, clock)


def test_the_merge_link_names_each_reviewer_whose_last_word_approved(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    queue: QueueService,
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WK_TEST_GITHUB_TOKEN", TOKEN)
    forge = {"github_token_env": "WK_TEST_GITHUB_TOKEN", "github_api_url": github.url}
    with serving(tmp_path, store, clock, {**SIGNED, **forge}) as server:
        detail = _merge_link(server, queue)
    assert detail["approved_by"] == ["bob", "alice"]  # in the order they approved
    assert "approvals_unread" not in detail
    assert len(github.asked) == 2  # both pages


def test_without_a_token_the_link_says_approvals_were_not_read(
    tmp_path: Path, store: Store, clock: ManualClock, queue: QueueService, github: FakeGitHub
) -> None:
    with serving(tmp_path, store, clock, {**SIGNED, "github_api_url": github.url}) as server:
        detail = _merge_link(server, queue)
    assert detail["approved_by"] is None
    assert "github_token_env" in detail["approvals_unread"]
    assert github.asked == []  # nothing was asked without a token


def test_a_refused_or_unreachable_api_is_said_on_the_link_and_the_merge_still_links(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    queue: QueueService,
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WK_TEST_GITHUB_TOKEN", "ghp_wrong")
    forge = {"github_token_env": "WK_TEST_GITHUB_TOKEN", "github_api_url": github.url}
    with serving(tmp_path, store, clock, {**SIGNED, **forge}) as server:
        refused = _merge_link(server, queue)
    assert refused["approved_by"] is None
    assert "401" in refused["approvals_unread"] and "Bad credentials" in refused["approvals_unread"]
    forge["github_api_url"] = "http://127.0.0.1:9"
    with serving(tmp_path / "again", store, clock, {**SIGNED, **forge}) as server:
        unreachable = _merge_link(server, queue)
    assert unreachable["approved_by"] is None
    assert "cannot reach" in unreachable["approvals_unread"]
