"""Execution records anyone can check, nobody can forge, and that stay as they were signed.

A record is signed once (Ed25519), the first time it is assembled after its job ended, and
kept: reading it again answers the same bytes. The public key is published without a
token, and ``watchkeeper verify-record FILE --public-key KEY`` checks a record offline. An
event changed in the database afterwards (the triggers that refuse it dropped first, as
someone with the database's credentials could) leaves the kept record as it was, and the
server's check says the timeline no longer matches it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.conftest import make_settings
from tests.integration.queue.conftest import ORGS, make_service, submit
from tests.support import patient_http
from tests.support.cli import wk
from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.queue.service import QueueService
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store


@pytest.fixture
def queue(tmp_path: Path, store: Store, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, store, clock)


@pytest.fixture
def server(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, store.url, orgs=ORGS)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as live:
        yield live
    runtime.sweeper.close()


def _finished_job(server: LiveServer, queue: QueueService) -> str:
    job = submit(queue)
    with Client(server.url, server.tokens["reporter"]) as reporter:
        reporter.timeline.emit_batch(
            [
                {
                    "phase": "implementer",
                    "job_id": job.id,
                    "round": 1,
                    "outcome": "done",
                    "model": "claude-haiku-4-5",
                    "provider": "anthropic",
                    "input_tokens": 1000,
                    "output_tokens": 100,
                },
                {"phase": "verify", "job_id": job.id, "round": 1, "outcome": "passed"},
            ]
        )
    queue.cancel(job.id)
    return job.id


def _edit_an_event(store: Store, job_id: str) -> None:
    """What someone with the database's credentials could do: drop the guard, rewrite."""
    with store.engine.begin() as conn:
        if store.is_sqlite:
            conn.execute(text("DROP TRIGGER timeline_events_no_update"))
        else:
            conn.execute(text("DROP TRIGGER timeline_events_append_only ON timeline_events"))
        conn.execute(
            text(
                "UPDATE timeline_events SET outcome = 'failed' WHERE job_id = :job AND "
                "phase = 'verify'"
            ),
            {"job": job_id},
        )


def test_a_record_is_signed_once_and_checked_offline_with_the_public_key(
    server: LiveServer, queue: QueueService, clock: ManualClock, tmp_path: Path, store: Store
) -> None:
    job_id = _finished_job(server, queue)
    with Client(server.url, server.tokens["viewer"]) as viewer:
        first = viewer.timeline.record(job_id)
        clock.advance(3600)
        again = viewer.timeline.record(job_id)
    assert first == again  # kept as signed: same time, same signature
    assert first["signature"]["algorithm"] == "Ed25519"
    published = patient_http.get(f"{server.url}/api/v1/records/key")  # no token
    assert published.status_code == 200, published.text
    key = published.json()
    assert key["algorithm"] == "Ed25519" and key["key_id"] == first["signature"]["key_id"]
    file = tmp_path / "record.json"
    file.write_text(json.dumps(first))
    offline = wk(
        "verify-record",
        str(file),
        "--public-key",
        key["public_key"],
        env={"WATCHKEEPER_URL": "http://127.0.0.1:9"},
    )
    assert offline.returncode == 0, offline.stderr
    assert f"valid: job {job_id}" in offline.stdout
    tampered = {**first, "spend": {**first["spend"], "cost": 0.0}}
    file.write_text(json.dumps(tampered))
    refused = wk("verify-record", str(file), "--public-key", key["public_key"])
    assert refused.returncode == 1 and "does not match" in refused.stderr
    bad_key = wk("verify-record", str(file), "--public-key", "abc")
    assert bad_key.returncode != 0 and "64 hex digits" in bad_key.stderr


def test_an_event_changed_after_signing_fails_the_servers_check(
    server: LiveServer, queue: QueueService, store: Store
) -> None:
    job_id = _finished_job(server, queue)
    with Client(server.url, server.tokens["viewer"]) as viewer:
        signed = viewer.timeline.record(job_id)
        before = viewer.request_object("POST", "/api/v1/records/verify", json=signed)
        _edit_an_event(store, job_id)
        after = viewer.request_object("POST", "/api/v1/records/verify", json=signed)
        kept = viewer.timeline.record(job_id)
    assert before["valid"] is True, before
    assert after["valid"] is False and "timeline no longer does" in after["reason"], after
    assert kept == signed  # the kept record still says what was signed
