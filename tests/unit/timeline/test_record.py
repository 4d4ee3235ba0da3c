"""Execution records: signed with the server's Ed25519 key; checked with its public key by
anyone, made by nobody else; any change fails verification."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from tests.conftest import make_settings
from watchkeeper.errors import ConfigError, Conflict, NotFound
from watchkeeper.records.queue import Job, Task, TaskStatus
from watchkeeper.records.timeline import Price, TimelineEvent, Usage
from watchkeeper.timeline import record

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
KEYS = record.RecordKeys(SigningKey(b"k" * 32))
OTHER = record.RecordKeys(SigningKey(b"o" * 32))


def _task(status: TaskStatus) -> Task:
    return Task(
        id="t-1",
        job_id="j-1",
        seq=0,
        org="acme",
        fleet="cpu",
        payload={"argv": ["x"]},
        status=status,
        rerunnable=True,
        attempt=1,
        max_attempts=3,
        version=2,
        lease_s=60,
        queued_at=T0,
        finished_at=T0 + timedelta(minutes=5),
    )


def _job(status: TaskStatus = TaskStatus.SUCCEEDED) -> Job:
    return Job("j-1", "fix the bug", "acme", "cpu", {"argv": ["x"]}, "alice", T0, (_task(status),))


def _event(
    n: int, phase: str, number: int | None, fingerprint: str | None = None, **more: object
) -> TimelineEvent:
    return TimelineEvent(
        id=n,
        phase=phase,
        at=T0 + timedelta(seconds=n),
        received_at=T0,
        reporter="runner",
        job_id="j-1",
        task_id="t-1",
        round=number,
        fingerprint=fingerprint,
        **more,
    )


EVENTS = [
    _event(1, "round_start", 1),
    _event(
        2,
        "implementer",
        1,
        role="implementer",
        model="claude-haiku-4-5",
        provider="anthropic",
        usage=Usage(1000, 100),
        price=Price(0.0015, False, "claude-haiku-4-5", "anthropic", "genai-prices 0"),
    ),
    _event(3, "review", 1, outcome="rejected", role="architect", rationale="tests missing"),
    _event(4, "verify", 1, "fp-a", outcome="failed"),
    _event(5, "round_start", 2),
    _event(6, "verify", 2, "fp-a", outcome="failed"),
    _event(
        7,
        "session_end",
        None,
        outcome="ok",
        model="mystery",
        provider="acme",
        price=Price(None, True, "mystery", "acme", "genai-prices 0"),
    ),
]


def _signed() -> dict[str, object]:
    link = {
        "job_id": "j-1",
        "kind": "merge",
        "url": "https://example.test/pr/1",
        "title": "fix",
        "actor": "bob",
        "detail": {"number": 1},
    }
    signed_link = record.sign_link(link, KEYS, T0)
    body = record.assemble("j-1", _job(), EVENTS, [], T0)
    return record.with_links(record.sign(body, KEYS), "j-1", [{**signed_link, "at": T0}])


def test_a_record_has_rounds_phases_outcomes_spend_and_links() -> None:
    signed = _signed()
    assert signed["job"]["status"] == "succeeded"
    rounds = signed["rounds"]
    assert [(r["round"], len(r["phases"])) for r in rounds] == [(1, 4), (2, 2), (None, 1)]
    assert rounds[0]["phases"][2] == {
        "phase": "review",
        "at": "2026-01-05T12:00:03Z",
        "outcome": "rejected",
        "role": "architect",
        "rationale": "tests missing",
    }
    assert rounds[1]["repeats_previous"] is True and rounds[0]["repeats_previous"] is False
    spend = signed["spend"]
    assert spend == {
        "cost": 0.0015,
        "unpriced": 1,
        "by_role": {"implementer": 0.0015},
        "by_provider_model": {"anthropic/claude-haiku-4-5": 0.0015},
    }
    assert signed["links"][0]["actor"] == "bob"


def test_the_signature_verifies_and_a_flipped_byte_does_not() -> None:
    data = json.dumps(_signed(), indent=2).encode()
    assert record.verify(data, KEYS.public_key).valid
    failures = set()
    for offset in range(0, len(data), 7):
        flipped = bytearray(data)
        flipped[offset] ^= 0x01
        verdict = record.verify(bytes(flipped), KEYS.public_key)
        if bytes(flipped) != data and json.loads(data) != _loads(bytes(flipped)):
            assert not verdict.valid, f"byte {offset} flipped and still valid"
            failures.add(verdict.reason.split(":")[0])
    assert "the signature does not match" in failures
    assert not record.verify(data, OTHER.public_key).valid
    assert "another key" in record.verify(data, OTHER.public_key).reason


def _loads(data: bytes) -> object:
    try:
        return json.loads(data)
    except ValueError:
        return None


def test_a_link_changed_after_it_was_signed_fails() -> None:
    signed = _signed()
    signed["links"][0]["actor"] = "mallory"
    verdict = record.verify(json.dumps(signed).encode(), KEYS.public_key)
    assert not verdict.valid and verdict.reason == "link 0 has a signature that does not match"


def test_nobody_without_the_private_key_can_make_a_record_that_verifies() -> None:
    forged = _signed()
    forged["spend"]["cost"] = 0.0
    by_another = record.sign(forged, OTHER)
    by_another["signature"]["key_id"] = KEYS.key_id  # claiming to be the server's
    verdict = record.verify(json.dumps(by_another).encode(), KEYS.public_key)
    assert not verdict.valid and "does not match" in verdict.reason


def test_records_only_for_finished_jobs() -> None:
    with pytest.raises(Conflict, match="running"):
        record.assemble("j-1", _job(TaskStatus.RUNNING), EVENTS, [], T0)
    with pytest.raises(NotFound):
        record.assemble("j-2", None, [], [], T0)
    deleted = record.assemble("j-1", None, EVENTS, [], T0)
    assert deleted["job"] == {"id": "j-1", "status": "deleted", "tasks": []}


def test_the_key_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "sqlite://")
    keys = record.load_keys(settings)
    path = settings.data_dir / record.SEED_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(keys.public_key) == 32 and record.load_keys(settings).public_key == keys.public_key
    assert keys.legacy is None  # no old shared key here, and none is made


def test_the_key_may_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path, "sqlite://", records={"key_env": "WK_TEST_RECORD_KEY"})
    with pytest.raises(ConfigError, match="WK_TEST_RECORD_KEY"):
        record.load_keys(settings)
    monkeypatch.setenv("WK_TEST_RECORD_KEY", "shared between replicas")
    with pytest.raises(ConfigError, match="64 hex digits"):
        record.load_keys(settings)
    seed = record.new_seed()
    monkeypatch.setenv("WK_TEST_RECORD_KEY", seed)
    assert bytes(record.load_keys(settings).signing) == bytes.fromhex(seed)
    assert not (settings.data_dir / record.SEED_FILE).exists()


def test_a_record_signed_with_the_old_shared_key_is_checked_with_it() -> None:
    secret = b"s" * 32
    body = record.assemble("j-1", _job(), EVENTS, [], T0)
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    signature = {
        "algorithm": record.LEGACY_ALGORITHM,
        "key_id": record.key_id(secret),
        "value": record.mac(secret, unsigned),
    }
    data = json.dumps({**unsigned, "signature": signature}).encode()
    assert record.verify(data, KEYS.public_key, secret).valid
    assert not record.verify(data, KEYS.public_key, b"x" * 32).valid
    without = record.verify(data, KEYS.public_key)
    assert not without.valid and "old shared key" in without.reason
