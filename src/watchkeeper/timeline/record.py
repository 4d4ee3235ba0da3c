"""Execution records: a finished job's rounds, phases, outcomes, spend and links, signed.

A record is JSON. Its ``signature`` is HMAC-SHA256, with the server's record
key, over the canonical form of everything else (keys sorted, no spaces,
UTF-8), so it can be verified later by whoever holds the key. The key is
``[records] key_env`` (an environment variable) or a random key generated once
into ``DATA_DIR/record.key`` with mode 0600. Links appended later (a merged
pull request) carry a signature of their own, made with the same key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchkeeper.clock import rfc3339
from watchkeeper.errors import ConfigError, Conflict, NotFound
from watchkeeper.queue import rollup
from watchkeeper.records.queue import Job

if TYPE_CHECKING:
    from watchkeeper.config import Settings
    from watchkeeper.records.timeline import TimelineEvent

FORMAT = "watchkeeper.execution-record/1"
ALGORITHM = "HMAC-SHA256"
KEY_FILE = "record.key"


def load_key(settings: Settings) -> bytes:
    """The record key: from ``[records] key_env``, or ``DATA_DIR/record.key`` (made once)."""
    env_name = settings.records.key_env
    if env_name:
        value = os.environ.get(env_name)
        if not value:
            raise ConfigError(
                f"records.key_env = {env_name!r}: the environment variable is not set"
            )
        return value.encode()
    return _key_file(settings.data_dir / KEY_FILE)


def _key_file(path: Path) -> bytes:
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the record key: {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return _key_file(path)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(key.hex() + "\n")
    return key


def canonical(value: Any) -> bytes:
    """The bytes a signature covers."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def key_id(key: bytes) -> str:
    """A short public name of a key, so a verifier can tell which key signed."""
    return hashlib.sha256(b"watchkeeper-record-key:" + key).hexdigest()[:16]


def mac(key: bytes, value: Any) -> str:
    """HMAC-SHA256 of ``value``'s canonical form, hex."""
    return hmac.new(key, canonical(value), hashlib.sha256).hexdigest()


def sign(body: dict[str, Any], key: bytes) -> dict[str, Any]:
    """``body`` with its signature."""
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    signature = {"algorithm": ALGORITHM, "key_id": key_id(key), "value": mac(key, unsigned)}
    return {**unsigned, "signature": signature}


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a record is authentic, and if not, why."""

    valid: bool
    reason: str


def verify(data: bytes, key: bytes) -> Verdict:
    """Check a record file's bytes against ``key``."""
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        return Verdict(False, f"not a JSON record: {exc}")
    if not isinstance(record, dict) or not isinstance(record.get("signature"), dict):
        return Verdict(False, "no signature: this is not a watchkeeper execution record")
    signature = record["signature"]
    if signature.get("algorithm") != ALGORITHM:
        return Verdict(False, f"unknown signature algorithm {signature.get('algorithm')!r}")
    if signature.get("key_id") != key_id(key):
        return Verdict(False, "signed with another key (its key_id differs from this server's)")
    expected = mac(key, {k: v for k, v in record.items() if k != "signature"})
    if not hmac.compare_digest(expected, str(signature.get("value", ""))):
        return Verdict(False, "the signature does not match: the record was changed")
    bad = [i for i, link in enumerate(record.get("links", [])) if not _link_ok(key, link)]
    if bad:
        return Verdict(False, f"link {bad[0]} has a signature that does not match")
    return Verdict(True, f"valid: job {record.get('job', {}).get('id')}, signed by {key_id(key)}")


def link_body(link: dict[str, Any]) -> dict[str, Any]:
    """The part of a link its own signature covers."""
    return {k: link.get(k) for k in ("job_id", "kind", "url", "title", "actor", "detail")}


def _link_ok(key: bytes, link: Any) -> bool:
    if not isinstance(link, dict):
        return False
    return hmac.compare_digest(mac(key, link_body(link)), str(link.get("signature", "")))


def assemble(
    job_id: str,
    job: Job | None,
    events: Sequence[TimelineEvent],
    links: Sequence[dict[str, Any]],
    now: datetime,
) -> dict[str, Any]:
    """The unsigned record of a finished job (or of a deleted job that left events)."""
    if job is None and not events:
        raise NotFound(f"no job {job_id!r} and no timeline events name it")
    status = "deleted" if job is None else rollup.of_tasks(job.tasks).value
    if job is not None and status in ("queued", "running"):
        raise Conflict(f"job {job_id} is {status}: its record is assembled once it has finished")
    return {
        "format": FORMAT,
        "generated_at": rfc3339(now),
        "job": _job(job_id, job, status),
        "rounds": _rounds(events),
        "spend": _spend(events),
        "links": [{**link, "job_id": job_id, "at": rfc3339(link["at"])} for link in links],
    }


def _job(job_id: str, job: Job | None, status: str) -> dict[str, Any]:
    if job is None:
        return {"id": job_id, "status": status, "tasks": []}
    return {
        "id": job.id,
        "title": job.title,
        "org": job.org,
        "fleet": job.fleet,
        "submitted_by": job.submitted_by,
        "created_at": rfc3339(job.created_at),
        "status": status,
        "tasks": [
            {
                "id": task.id,
                "seq": task.seq,
                "status": task.status.value,
                "attempt": task.attempt,
                "finished_at": rfc3339(task.finished_at),
                "failure": task.failure_reason,
            }
            for task in job.tasks
        ],
    }


def _phase(event: TimelineEvent) -> dict[str, Any]:
    body = event.as_dict()
    for key in ("id", "org", "job_id", "task_id", "round", "fingerprint", "reporter"):
        body.pop(key)
    return {key: value for key, value in body.items() if value not in (None, 0, False)}


def _rounds(events: Sequence[TimelineEvent]) -> list[dict[str, Any]]:
    rounds: dict[tuple[str, int | None], dict[str, Any]] = {}
    for event in events:
        key = (event.task_id or "", event.round)
        entry = rounds.setdefault(
            key, {"task_id": event.task_id, "round": event.round, "fingerprint": None,
                  "phases": []}
        )  # fmt: skip
        entry["fingerprint"] = entry["fingerprint"] or event.fingerprint
        entry["phases"].append(_phase(event))
    previous: dict[str, str | None] = {}
    for (task_id, number), entry in rounds.items():
        if number is None or entry["fingerprint"] is None:
            continue
        entry["repeats_previous"] = previous.get(task_id) == entry["fingerprint"]
        previous[task_id] = entry["fingerprint"]
    return list(rounds.values())


def _spend(events: Sequence[TimelineEvent]) -> dict[str, Any]:
    by_role: dict[str, float] = {}
    by_model: dict[str, float] = {}
    cost, unpriced = 0.0, 0
    for event in events:
        if event.price.unpriced:
            unpriced += 1
        if event.price.cost is None:
            continue
        cost += event.price.cost
        role = event.role or "(none)"
        by_role[role] = by_role.get(role, 0.0) + event.price.cost
        model = f"{event.provider}/{event.model}"
        by_model[model] = by_model.get(model, 0.0) + event.price.cost
    return {"cost": cost, "unpriced": unpriced, "by_role": by_role, "by_provider_model": by_model}
