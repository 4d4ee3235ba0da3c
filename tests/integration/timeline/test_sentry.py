"""A Sentry issue becomes one job in the configured fleet; a regression reopens it.

Deliveries are signed as Sentry's integration platform signs them: ``Sentry-Hook-Signature``
is the hex HMAC-SHA256 of the body with the integration's client secret, beside
``Sentry-Hook-Resource`` and ``Sentry-Hook-Timestamp``. Forged, unsigned and stale ones
change nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.queue.conftest import make_service
from tests.integration.timeline.test_webhooks import serving
from tests.support import patient_http
from tests.support.live_server import LiveServer
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.store import Store

SECRET = "sentry-client-secret"
ISSUE_ID = "4506789"


@pytest.fixture
def server(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[LiveServer]:
    forge = {
        "sentry_secret": SECRET,
        "sentry_org": "acme",
        "sentry_fleet": "cpu",
        "sentry_argv": ["triage", "--issue", "{short_id}", "{url}"],
    }
    with serving(tmp_path, store, clock, forge) as live:
        yield live


@pytest.fixture
def queue(tmp_path: Path, store: Store, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, store, clock)


def _send(
    server: LiveServer,
    resource: str,
    payload: dict[str, Any],
    clock: ManualClock,
    *,
    secret: str | None = SECRET,
    age_s: float = 2.0,
) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "Request-ID": "req-1",
        "Sentry-Hook-Resource": resource,
        "Sentry-Hook-Timestamp": str(int(clock().timestamp() - age_s)),
    }
    if secret is not None:
        headers["Sentry-Hook-Signature"] = hmac.new(
            secret.encode(), body, hashlib.sha256
        ).hexdigest()
    return patient_http.post(f"{server.url}/webhooks/sentry", content=body, headers=headers)


def _alert(culprit: str = "app.billing in charge") -> dict[str, Any]:
    """An issue alert (``event_alert``, ``triggered``) with a stack trace."""
    frames = [
        {"filename": "app/web.py", "lineno": 10, "function": "handle", "context_line": "charge()"},
        {
            "filename": "app/billing.py",
            "lineno": 42,
            "function": "charge",
            "context_line": (
                "post(url, headers={'Authorization': 'Bearer sk_live_abcdef123456789'})"
            ),
        },
    ]
    return {
        "action": "triggered",
        "installation": {"uuid": "inst-1"},
        "data": {
            "event": {
                "issue_id": ISSUE_ID,
                "title": "KeyError: 'amount'",
                "culprit": culprit,
                "web_url": f"https://sentry.example/organizations/acme/issues/{ISSUE_ID}/events/e1/",
                "issue_url": f"https://sentry.example/api/0/issues/{ISSUE_ID}/",
                "level": "error",
                "exception": {
                    "values": [
                        {"type": "KeyError", "value": "'amount'", "stacktrace": {"frames": frames}}
                    ]
                },
            },
            "triggered_rule": "New issues",
        },
        "actor": {"type": "application", "id": "sentry", "name": "Sentry"},
    }


def _issue(action: str, substatus: str | None = None, last_seen: str = "12:00") -> dict[str, Any]:
    """An issue webhook (``issue``): created, resolved, unresolved..."""
    return {
        "action": action,
        "installation": {"uuid": "inst-1"},
        "data": {
            "issue": {
                "id": ISSUE_ID,
                "shortId": "BILLING-1A",
                "title": "KeyError: 'amount'",
                "culprit": "app.billing in charge",
                "permalink": f"https://sentry.example/organizations/acme/issues/{ISSUE_ID}/",
                "status": "unresolved" if action != "resolved" else "resolved",
                "substatus": substatus,
                "level": "error",
                "project": {"slug": "billing"},
                "metadata": {"type": "KeyError", "value": "'amount'"},
                "lastSeen": f"2026-01-05T{last_seen}:00Z",
            }
        },
        "actor": {"type": "user", "id": 1, "name": "dev"},
    }


def test_an_alert_becomes_one_job_with_the_issue_as_its_input(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    answer = _send(server, "event_alert", _alert(), clock)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["outcome"] == "submitted", body
    job = queue.job(body["job_id"])
    assert (job.org, job.fleet, job.submitted_by) == ("acme", "cpu", "sentry")
    assert job.title == f"{ISSUE_ID}: KeyError: 'amount'"
    sentry = job.payload["sentry"]
    assert sentry["culprit"] == "app.billing in charge"
    assert sentry["permalink"] == f"https://sentry.example/organizations/acme/issues/{ISSUE_ID}/"
    assert "app/billing.py:42 in charge" in sentry["stack"]
    assert "sk_live_abcdef123456789" not in json.dumps(job.payload)  # redacted
    assert job.payload["argv"][:2] == ["triage", "--issue"]
    # The same issue again (another alert, its issue webhook): still one job.
    again = _send(server, "event_alert", _alert(culprit="elsewhere"), clock)
    assert again.json()["outcome"] == "known"
    created = _send(server, "issue", _issue("created"), clock)
    assert created.json()["outcome"] == "known"
    assert len(queue.jobs()) == 1


def test_the_same_delivery_twice_is_handled_once(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    first = _send(server, "issue", _issue("created"), clock)
    assert first.json()["outcome"] == "submitted"
    assert _send(server, "issue", _issue("created"), clock).json()["outcome"] == "duplicate"
    assert len(queue.jobs()) == 1


def test_a_regression_reopens_the_issue_s_job_once_it_ended(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    job_id = _send(server, "issue", _issue("created"), clock).json()["job_id"]
    while_open = _send(server, "issue", _issue("unresolved", "regressed"), clock)
    assert while_open.json()["outcome"] == "open", while_open.json()  # its task has not ended
    queue.cancel(job_id)
    resolved = _send(server, "issue", _issue("resolved"), clock)
    assert resolved.json()["outcome"] == "ignored"
    clock.advance(1)
    reopened = _send(server, "issue", _issue("unresolved", "regressed", "12:05"), clock)
    assert reopened.json()["outcome"] == "reopened", reopened.json()
    assert reopened.json()["job_id"] == job_id
    tasks = queue.job(job_id).tasks
    assert len(tasks) == 2 and tasks[-1].status.value == "queued"
    assert tasks[-1].payload["sentry"]["regressed"] is True
    assert len(queue.jobs()) == 1


def test_forged_unsigned_and_stale_deliveries_change_nothing(
    server: LiveServer, queue: QueueService, clock: ManualClock
) -> None:
    forged = _send(server, "event_alert", _alert(), clock, secret="guess")
    assert forged.status_code == 401 and "does not match" in forged.json()["error"]["message"]
    unsigned = _send(server, "event_alert", _alert(), clock, secret=None)
    assert unsigned.status_code == 401 and "not signed" in unsigned.json()["error"]["message"]
    stale = _send(server, "event_alert", _alert(), clock, age_s=400)
    assert stale.status_code == 401 and "old" in stale.json()["error"]["message"]
    assert queue.jobs() == []
    # None of them was remembered: the real delivery still counts.
    assert _send(server, "event_alert", _alert(), clock).json()["outcome"] == "submitted"


def test_other_resources_are_ignored_and_an_unconfigured_endpoint_is_off(
    server: LiveServer, clock: ManualClock, tmp_path: Path, store: Store
) -> None:
    assert _send(server, "installation", {"action": "created"}, clock).json()["outcome"] == (
        "ignored"
    )
    assert _send(server, "comment", {"action": "created"}, clock).json()["outcome"] == "ignored"
    with serving(tmp_path / "off", store, clock, {}) as off:
        answer = _send(off, "event_alert", _alert(), clock)
    assert answer.status_code == 404 and "sentry_secret" in answer.json()["error"]["message"]
