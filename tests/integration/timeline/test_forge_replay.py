"""A replayed forge delivery is recognised by what its signature covers: the body.

GitHub signs the body, not the ``X-GitHub-Delivery`` header, so anyone holding
one signed delivery could send it again under a new delivery id. Linear signs
the body too (its ``Linear-Delivery`` header is not signed either).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx

from tests.integration.queue.conftest import submit
from tests.support import patient_http
from tests.support.live_server import LiveServer
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.store import Store
from watchkeeper.store.timeline import TimelineStore
from watchkeeper.timeline.forge import now_ms

from .test_webhooks import GITHUB_SECRET, LINEAR_SECRET, _issue, _merged
from .test_webhooks import queue as queue  # a fixture
from .test_webhooks import server as server  # a fixture


def _signed(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _post_github(server: LiveServer, body: bytes, delivery: str) -> httpx.Response:
    headers = {
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": f"sha256={_signed(GITHUB_SECRET, body)}",
        "Content-Type": "application/json",
    }
    return patient_http.post(f"{server.url}/webhooks/github", content=body, headers=headers)


def _linear_body(data: dict[str, Any], clock: ManualClock, created_at: str) -> bytes:
    payload = {
        "action": "create",
        "type": "Issue",
        "data": data,
        "url": data.get("url"),
        "createdAt": created_at,
        "webhookId": "w-1",
        "webhookTimestamp": now_ms(clock()) - 5000,
        "organizationId": "org-1",
    }
    return json.dumps(payload).encode()


def _post_linear(server: LiveServer, body: bytes, delivery: str) -> httpx.Response:
    headers = {
        "Linear-Signature": _signed(LINEAR_SECRET, body),
        "Linear-Delivery": delivery,
        "Content-Type": "application/json",
    }
    return patient_http.post(f"{server.url}/webhooks/linear", content=body, headers=headers)


def test_a_signed_github_body_replayed_under_a_new_delivery_id_links_once(
    server: LiveServer, queue: QueueService, store: Store
) -> None:
    job = submit(queue)
    body = json.dumps(_merged(f"Closes wk-job:{job.id}")).encode()
    first = _post_github(server, body, "d-1")
    assert first.json() == {"outcome": "linked", "jobs": [job.id], "unknown_jobs": []}
    replayed = _post_github(server, body, "d-replayed")
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["outcome"] == "duplicate"
    assert replayed.json()["delivery"] == "d-replayed"
    (link,) = TimelineStore(store.engine).links(job.id)
    assert link["detail"]["delivery"] == "d-1"


def test_a_signed_linear_body_replayed_under_a_new_delivery_id_is_a_duplicate(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    body = _linear_body(_issue(), clock, "2026-01-05T11:59:55.000Z")
    assert _post_linear(server, body, "l-1").json()["outcome"] == "submitted"
    assert _post_linear(server, body, "l-replayed").json()["outcome"] == "duplicate"
    assert len(queue.jobs()) == 1


def test_two_different_signed_linear_bodies_are_never_taken_for_one(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    # Two issues created in the same instant through the same webhook: only the
    # body (signed as a whole) tells their deliveries apart.
    other = {**_issue(), "id": "issue-uuid-2", "identifier": "ENG-13"}
    first = _linear_body(_issue(), clock, "2026-01-05T11:59:55.000Z")
    second = _linear_body(other, clock, "2026-01-05T11:59:55.000Z")
    assert _post_linear(server, first, "l-1").json()["outcome"] == "submitted"
    assert _post_linear(server, second, "l-2").json()["outcome"] == "submitted"
    assert len(queue.jobs()) == 2
