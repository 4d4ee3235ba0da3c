"""GitHub and Linear webhooks: signed deliveries act once; unsigned or forged ones do nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import make_settings
from tests.integration.queue.conftest import ORGS, make_service, submit
from tests.support import patient_http
from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.queue.service import QueueService
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.timeline import TimelineStore
from watchkeeper.timeline import record
from watchkeeper.timeline.forge import now_ms

GITHUB_SECRET = "github-webhook-secret"
LINEAR_SECRET = "linear-webhook-secret"


def _serve(tmp_path: Path, store: Store, clock: ManualClock, forge: dict[str, Any]) -> Runtime:
    settings = make_settings(tmp_path, store.url, forge=forge, orgs=ORGS)
    return Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))


@contextmanager
def serving(
    tmp_path: Path, store: Store, clock: ManualClock, forge: dict[str, Any]
) -> Iterator[LiveServer]:
    """A live server whose ``[forge]`` table is ``forge``, its sweeper closed after."""
    runtime = _serve(tmp_path, store, clock, forge)
    try:
        with live_server(runtime) as live:
            yield live
    finally:
        runtime.sweeper.close()


@pytest.fixture
def server(
    tmp_path: Path, store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LiveServer]:
    monkeypatch.setenv("WK_TEST_LINEAR_SECRET", LINEAR_SECRET)
    forge = {
        "github_secret": GITHUB_SECRET,
        "linear_secret_env": "WK_TEST_LINEAR_SECRET",
        "linear_argv": ["agent", "--issue", "{identifier}", "{url}"],
        "linear_org": "acme",
        "linear_fleet": "cpu",
    }
    with serving(tmp_path, store, clock, forge) as live:
        yield live


@pytest.fixture
def queue(tmp_path: Path, store: Store, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, store, clock)


def _github(
    server: LiveServer,
    payload: dict[str, Any],
    *,
    delivery: str = "d-1",
    secret: str | None = GITHUB_SECRET,
    event: str = "pull_request",
) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "Content-Type": "application/json",
    }
    if secret is not None:
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers["X-Hub-Signature-256"] = f"sha256={digest}"
    return patient_http.post(f"{server.url}/webhooks/github", content=body, headers=headers)


def _merged(text: str, *, branch: str = "fix-bug", merged: bool = True) -> dict[str, Any]:
    return {
        "action": "closed",
        "number": 42,
        "pull_request": {
            "number": 42,
            "html_url": "https://github.example/acme/app/pull/42",
            "title": "Fix the flaky test",
            "body": text,
            "merged": merged,
            "merged_at": "2026-01-05T12:00:00Z",
            "merge_commit_sha": "abc123",
            "merged_by": {"login": "octocat"},
            "head": {"ref": branch},
        },
        "repository": {"full_name": "acme/app"},
        "sender": {"login": "octocat"},
    }


def test_a_merged_pull_request_links_to_the_job_s_signed_record(
    server: LiveServer, queue: QueueService, store: Store
) -> None:
    job, other = submit(queue), submit(queue)
    answer = _github(server, _merged(f"Closes wk-job:{job.id}", branch=f"wk-job/{other.id}"))
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"outcome": "linked", "jobs": [job.id, other.id], "unknown_jobs": []}
    # The same signed body again is the same delivery (see test_forge_replay.py).
    again = _github(server, _merged(f"Closes wk-job:{job.id}", branch=f"wk-job/{other.id}"))
    assert again.json() == {"outcome": "duplicate", "delivery": "d-1"}
    assert len(TimelineStore(store.engine).links(job.id)) == 1
    queue.cancel(job.id)
    with Client(server.url, server.tokens["viewer"]) as viewer:
        signed = viewer.timeline.record(job.id)
    (link,) = signed["links"]
    assert (link["kind"], link["actor"], link["url"]) == (
        "merge",
        "octocat",
        "https://github.example/acme/app/pull/42",
    )
    assert link["detail"]["repository"] == "acme/app"
    keys = record.load_keys(server.runtime.settings)
    assert record.verify(json.dumps(signed).encode(), keys.public_key).valid


def test_unsigned_and_forged_github_deliveries_change_nothing(
    server: LiveServer, queue: QueueService, store: Store
) -> None:
    job = submit(queue)
    payload = _merged(f"wk-job:{job.id}")
    unsigned = _github(server, payload, secret=None)
    assert unsigned.status_code == 401 and "not signed" in unsigned.json()["error"]["message"]
    forged = _github(server, payload, secret="guess")
    assert forged.status_code == 401 and "does not match" in forged.json()["error"]["message"]
    assert TimelineStore(store.engine).links(job.id) == []
    # The forged deliveries were not remembered: the real one with the same id still counts.
    assert _github(server, payload).json()["outcome"] == "linked"


def test_github_deliveries_that_do_not_link(server: LiveServer, queue: QueueService) -> None:
    job = submit(queue)
    assert _github(server, {"zen": "hi"}, event="ping").json() == {"outcome": "pong"}
    unmerged = _github(server, _merged(f"wk-job:{job.id}", merged=False), delivery="d-2")
    assert unmerged.json()["outcome"] == "ignored"
    unknown = _github(server, _merged("wk-job:j-0000ff"), delivery="d-3")
    assert unknown.json() == {"outcome": "linked", "jobs": [], "unknown_jobs": ["j-0000ff"]}


def _linear(
    server: LiveServer,
    data: dict[str, Any],
    clock: ManualClock,
    *,
    webhook_id: str = "w-1",
    secret: str = LINEAR_SECRET,
    age_s: float = 5.0,
    action: str = "create",
) -> httpx.Response:
    payload = {
        "action": action,
        "type": "Issue",
        "data": data,
        "url": data.get("url"),
        "createdAt": "2026-01-05T11:59:55.000Z",
        "webhookId": webhook_id,
        "webhookTimestamp": now_ms(clock()) - int(age_s * 1000),
        "organizationId": "org-1",
    }
    body = json.dumps(payload).encode()
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {"Linear-Signature": signature, "Content-Type": "application/json"}
    return patient_http.post(f"{server.url}/webhooks/linear", content=body, headers=headers)


def _issue(labels: tuple[str, ...] = ("watchkeeper",), state: str = "Todo") -> dict[str, Any]:
    return {
        "id": "issue-uuid-1",
        "identifier": "ENG-12",
        "title": "Make the importer resumable",
        "url": "https://linear.example/acme/issue/ENG-12",
        "labels": [{"id": f"l-{name}", "name": name} for name in labels],
        "state": {"id": "s-1", "name": state, "type": "unstarted"},
    }


def test_a_labelled_linear_issue_becomes_one_job(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    answer = _linear(server, _issue(), clock)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["outcome"] == "submitted" and body["issue"] == "ENG-12"
    job = queue.job(body["job_id"])
    assert job.title == "ENG-12: Make the importer resumable"
    assert (job.org, job.fleet, job.submitted_by) == ("acme", "cpu", "linear")
    assert job.payload["argv"] == [
        "agent",
        "--issue",
        "ENG-12",
        "https://linear.example/acme/issue/ENG-12",
    ]
    assert _linear(server, _issue(), clock).json()["outcome"] == "duplicate"
    moved = _linear(server, _issue((), "In Progress"), clock, webhook_id="w-2", action="update")
    assert moved.json() == {"outcome": "known", "issue": "ENG-12"}
    assert len(queue.jobs()) == 1


def test_an_issue_moved_to_in_progress_becomes_a_job(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    ignored = _linear(server, _issue(()), clock)
    assert ignored.json()["outcome"] == "ignored"
    moved = _linear(server, _issue((), "In Progress"), clock, webhook_id="w-2", action="update")
    assert moved.json()["outcome"] == "submitted"


def test_forged_and_stale_linear_deliveries_change_nothing(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    forged = _linear(server, _issue(), clock, secret="guess")
    assert forged.status_code == 401
    stale = _linear(server, _issue(), clock, age_s=61)
    assert stale.status_code == 401 and "61 s old" in stale.json()["error"]["message"]
    unsigned = patient_http.post(f"{server.url}/webhooks/linear", json={"type": "Issue"})
    assert unsigned.status_code == 401
    assert queue.jobs() == []
    assert _linear(server, _issue(), clock).json()["outcome"] == "submitted"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_without_a_command_the_request_is_kept_pending(
    tmp_path: Path, store: Store, clock: ManualClock, queue: QueueService
) -> None:
    runtime = _serve(tmp_path, store, clock, {"linear_secret": LINEAR_SECRET})
    with live_server(runtime) as server:
        answer = _linear(server, _issue(), clock)
        github = _github(server, _merged("wk-job:j-00"))
    runtime.sweeper.close()
    assert answer.json()["outcome"] == "pending" and "linear_argv" in answer.json()["reason"]
    (pending,) = TimelineStore(store.engine).requests("linear")
    assert (pending["status"], pending["job_id"], pending["external_id"]) == (
        "pending",
        None,
        "issue-uuid-1",
    )
    assert queue.jobs() == []
    assert github.status_code == 404 and github.json()["error"]["code"] == "not_configured"
