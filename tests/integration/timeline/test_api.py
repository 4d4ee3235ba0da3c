"""Timelines over HTTP, the SDK and the CLI: batches, refusals, spend, signed records."""

from __future__ import annotations

import gzip
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.queue.conftest import make_service, submit
from tests.support import patient_http
from tests.support.cli import wk
from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.errors import ClientError
from watchkeeper.queue.service import QueueService
from watchkeeper.runtime import Runtime


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


@pytest.fixture
def reporter(server: LiveServer) -> Iterator[Client]:
    with Client(server.url, server.tokens["reporter"]) as client:
        yield client


@pytest.fixture
def viewer(server: LiveServer) -> Iterator[Client]:
    with Client(server.url, server.tokens["viewer"]) as client:
        yield client


@pytest.fixture
def queue(tmp_path: Path, runtime: Runtime, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, runtime.store, clock)


def _call(task_id: str, n: int, **more: object) -> dict[str, object]:
    return {
        "phase": "implementer",
        "task_id": task_id,
        "round": n,
        "role": "implementer",
        "model": "claude-haiku-4-5",
        "provider": "anthropic",
        "input_tokens": 10_000,
        "cache_read_tokens": 6_000,
        "output_tokens": 500,
        **more,
    }


def test_a_batch_is_stored_and_priced(reporter: Client, viewer: Client) -> None:
    done = reporter.timeline.emit_batch(
        [
            {"phase": "round_start", "task_id": "t-1", "round": 1},
            _call("t-1", 1),
            {
                "phase": "verify",
                "task_id": "t-1",
                "round": 1,
                "fingerprint": "abc",
                "outcome": "ok",
            },
            _call("t-1", 1, model="claude-private-9"),
        ]
    )
    assert done["accepted"] == 4 and done["unpriced"] == 1 and done["cost"] > 0
    events = viewer.timeline.events(task_id="t-1")
    assert [e["phase"] for e in events] == ["round_start", "implementer", "verify", "implementer"]
    assert events[1]["price"]["provider"] == "anthropic" and events[1]["cost"] > 0
    assert events[3]["cost"] is None and events[3]["unpriced"] is True
    assert viewer.timeline.last_progress_at("t-1") is not None


def test_a_bad_event_refuses_the_whole_batch_naming_its_index_and_field(
    reporter: Client, viewer: Client
) -> None:
    batch = [_call("t-2", 1), _call("t-2", 1), _call("t-2", 1, provider="not a provider")]
    with pytest.raises(ClientError) as refused:
        reporter.timeline.emit_batch(batch)
    assert refused.value.status == 422
    assert refused.value.message.startswith("event 2, provider:")
    with pytest.raises(ClientError) as cached:
        reporter.timeline.emit_batch([_call("t-2", 1, cache_write_tokens=5_000)])
    assert cached.value.message.startswith("event 0, cache_write_tokens: cached tokens exceed")
    assert viewer.timeline.events(task_id="t-2") == []


def test_refusals_over_raw_http(server: LiveServer) -> None:
    with server.client("reporter") as http:
        too_many = http.post("/api/v1/events/batch", json={"events": [{"phase": "x"}] * 5001})
        assert too_many.status_code == 422
        assert too_many.json()["error"]["field"] == "events"
        unknown = http.post("/api/v1/events/batch", json={"events": [{"phase": "x", "cost": 1}]})
        error = unknown.json()["error"]
        assert unknown.status_code == 422 and (error["index"], error["field"]) == (0, "cost")
        broken = http.post("/api/v1/events/batch", content=b"{", headers={"Content-Type": "x"})
        assert broken.status_code == 400 and broken.json()["error"]["code"] == "malformed_json"
        bad_gzip = http.post(
            "/api/v1/events/batch", content=b"nope", headers={"Content-Encoding": "gzip"}
        )
        assert bad_gzip.status_code == 400 and bad_gzip.json()["error"]["code"] == "bad_encoding"
        plain = http.post("/api/v1/events/batch", json={"events": [{"phase": "tool"}]})
        assert plain.status_code == 201 and plain.json()["accepted"] == 1
    with server.client("viewer") as http:
        assert http.post("/api/v1/events/batch", json={"events": []}).status_code == 403
    with server.client(None) as http:
        assert http.post("/api/v1/events/batch", json={"events": []}).status_code == 401


def test_five_thousand_events_in_one_gzip_request(reporter: Client, viewer: Client) -> None:
    batch = [_call("t-big", i // 10, rationale=f"call {i}") for i in range(5000)]
    assert reporter.timeline.emit_batch(batch)["accepted"] == 5000
    assert viewer.timeline.spend("model")["totals"]["calls"] == 5000
    with pytest.raises(ClientError, match="at most 5000"):
        reporter.timeline.emit_batch([*batch, batch[0]])


def test_spend_by_provider_and_an_unknown_grouping(reporter: Client, viewer: Client) -> None:
    reporter.timeline.emit_batch(
        [
            _call("t-3", 1, input_tokens=1_000_000, cache_read_tokens=0, output_tokens=1_000_000),
            _call(
                "t-3",
                1,
                input_tokens=1_000_000,
                cache_read_tokens=0,
                output_tokens=1_000_000,
                provider="quicksilverpro",
                role="architect",
            ),
        ]
    )
    body = viewer.timeline.spend("provider")
    costs = {group["key"]: group["cost"] for group in body["groups"]}
    assert costs == pytest.approx({"anthropic": 6.0, "quicksilverpro": 4.8})
    assert body["totals"]["unpriced"] == 0
    roles = viewer.timeline.spend("role")["groups"]
    assert {g["key"] for g in roles} == {"implementer", "architect"}
    with pytest.raises(ClientError) as bad:
        viewer.timeline.spend("colour")
    assert bad.value.status == 422 and "by must be one of" in bad.value.message


def wk_as_viewer(server: LiveServer, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "WATCHKEEPER_URL": server.url,
        "WATCHKEEPER_TOKEN": server.tokens["viewer"],
        "WATCHKEEPER_CONFIG": str(config),
    }
    return wk(*args, env=env, columns=250)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_record_then_verify_it_and_a_flipped_byte_fails(
    server: LiveServer, reporter: Client, viewer: Client, queue: QueueService, tmp_path: Path
) -> None:
    job = submit(queue, org="acme")
    task = job.tasks[0]
    reporter.timeline.emit_batch(
        [
            _call(task.id, 1, job_id=job.id),
            {
                "phase": "review",
                "job_id": job.id,
                "task_id": task.id,
                "round": 1,
                "outcome": "approved",
                "rationale": "covers the edge case",
                "role": "architect",
            },
        ]
    )
    with pytest.raises(ClientError) as running:
        viewer.timeline.record(job.id)
    assert running.value.status == 409
    queue.cancel(job.id)
    signed = viewer.timeline.record(job.id)
    assert signed["job"]["status"] == "cancelled" and signed["signature"]["algorithm"]
    assert signed["rounds"][0]["phases"][1]["rationale"] == "covers the edge case"
    config = tmp_path / "watchkeeper.toml"
    data_dir = server.runtime.settings.data_dir
    config.write_text(f"data_dir = {json.dumps(str(data_dir))}\n", encoding="utf-8")
    out = tmp_path / "record.json"
    written = wk_as_viewer(server, config, "record", job.id, "--out", str(out))
    assert written.returncode == 0, written.stderr
    valid = wk_as_viewer(server, config, "verify-record", str(out))
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith(f"valid: job {job.id}")
    data = bytearray(out.read_bytes())
    at = data.index(b"covers the edge case")
    data[at] ^= 0x01
    out.write_bytes(bytes(data))
    invalid = wk_as_viewer(server, config, "verify-record", str(out))
    assert invalid.returncode == 1
    assert "invalid: the signature does not match" in invalid.stderr
    spent = wk_as_viewer(server, config, "spend", "--by", "role")
    assert spent.returncode == 0 and "implementer" in spent.stdout


def test_gzip_body_is_what_the_sdk_sends(server: LiveServer) -> None:
    body = gzip.compress(json.dumps({"events": [{"phase": "tool", "name": "ruff"}]}).encode())
    headers = {
        "Authorization": f"Bearer {server.tokens['reporter']}",
        "Content-Encoding": "gzip",
        "Content-Type": "application/json",
    }
    answer = patient_http.post(f"{server.url}/api/v1/events/batch", content=body, headers=headers)
    assert answer.status_code == 201 and answer.json()["accepted"] == 1


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_the_record_of_a_job_nobody_knows_is_not_found_and_nothing_is_signed(
    server: LiveServer, viewer: Client
) -> None:
    with pytest.raises(ClientError) as unknown:
        viewer.timeline.record("j-0123456789ab")
    assert unknown.value.status == 404 and unknown.value.code == "not_found"
    assert "j-0123456789ab" in unknown.value.message
    assert server.runtime.timeline.kept.latest("j-0123456789ab") is None
