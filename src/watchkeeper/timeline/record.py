"""Execution records: a finished job's rounds, phases, outcomes, spend and links, signed.

A record is JSON, signed once, when it is first assembled after its job ended, and kept
as signed (:class:`~watchkeeper.timeline.service.TimelineService.record`). Its
``signature`` is Ed25519, with the server's record signing key, over the canonical form
(keys sorted, no spaces, UTF-8) of everything but ``links`` and ``signature``: anyone with
the server's public key (``GET /api/v1/records/key``) can check it, offline, and nobody
without the private key can make one. Links appended later (a merged pull request) carry
a signature of their own, made with the same key when they arrived.

The signing key is a 32-byte Ed25519 seed: ``[records] key_env`` (an environment variable
holding it in hex, shared by replicas), or one generated once into
``DATA_DIR/record.ed25519`` with mode 0600. Records signed before (HMAC-SHA256 with the
shared secret in ``DATA_DIR/record.key``) are still checked by the server that holds it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from watchkeeper.clock import rfc3339
from watchkeeper.errors import ConfigError, Conflict, NotFound
from watchkeeper.queue import rollup
from watchkeeper.records.queue import Job

if TYPE_CHECKING:
    from watchkeeper.config import Settings
    from watchkeeper.records.timeline import TimelineEvent

FORMAT = "watchkeeper.execution-record/1"
ALGORITHM = "Ed25519"
#: How records were signed before: a secret shared by whoever could check them.
LEGACY_ALGORITHM = "HMAC-SHA256"
SEED_FILE = "record.ed25519"
#: The shared secret of records signed before; read to check them, never made any more.
KEY_FILE = "record.key"
#: How a link's own signature starts (a link signed before holds the HMAC's hex alone).
LINK_PREFIX = "ed25519:"
#: What the record's own signature does not cover: links are signed one by one.
_UNCOVERED = frozenset({"signature", "links"})


@dataclass(frozen=True, slots=True)
class RecordKeys:
    """The server's record keys: the signing key, and the old shared secret if it has one."""

    signing: SigningKey
    legacy: bytes | None = None

    @property
    def public_key(self) -> bytes:
        """The 32 bytes anyone checks this server's records with."""
        return bytes(self.signing.verify_key)

    @property
    def key_id(self) -> str:
        """A short public name of the key, so a verifier can tell which key signed."""
        return key_id(self.public_key)

    def published(self) -> dict[str, str]:
        """``GET /api/v1/records/key``: the public key, hex, and its id."""
        return {"algorithm": ALGORITHM, "public_key": self.public_key.hex(), "key_id": self.key_id}


def load_keys(settings: Settings) -> RecordKeys:
    """The record keys: the seed from ``[records] key_env`` or ``DATA_DIR/record.ed25519``
    (made once), and ``DATA_DIR/record.key`` if records were signed with it before."""
    env_name = settings.records.key_env
    if env_name:
        value = os.environ.get(env_name, "").strip()
        if not value:
            raise ConfigError(
                f"records.key_env = {env_name!r}: the environment variable is not set"
            )
        seed = _seed(value, f"records.key_env = {env_name!r}: the variable")
    else:
        seed = _seed_file(settings.data_dir / SEED_FILE)
    return RecordKeys(SigningKey(seed), _legacy_key(settings.data_dir / KEY_FILE))


def new_seed() -> str:
    """A fresh signing seed, hex: what ``[records] key_env`` holds."""
    return secrets.token_hex(32)


def key_bytes(text: str) -> bytes | None:
    """The 32 bytes 64 hex digits name (a seed or a public key); ``None`` for anything else."""
    try:
        found = bytes.fromhex(text.strip())
    except ValueError:
        return None
    return found if len(found) == 32 else None


def _seed(text: str, where: str) -> bytes:
    seed = key_bytes(text)
    if seed is None:
        raise ConfigError(
            f"{where} must hold an Ed25519 seed: 64 hex digits (make one with "
            "`python -c 'import secrets; print(secrets.token_hex(32))'`)"
        )
    return seed


def _seed_file(path: Path) -> bytes:
    try:
        return _seed(path.read_text(encoding="ascii").strip(), str(path))
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the record signing key: {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    seed = new_seed()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return _seed_file(path)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(seed + "\n")
    return bytes.fromhex(seed)


def _legacy_key(path: Path) -> bytes | None:
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def canonical(value: Any) -> bytes:
    """The bytes a signature covers."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def key_id(public_key: bytes) -> str:
    """A short public name of a key, so a verifier can tell which key signed."""
    return hashlib.sha256(b"watchkeeper-record-key:" + public_key).hexdigest()[:16]


def mac(key: bytes, value: Any) -> str:
    """HMAC-SHA256 of ``value``'s canonical form, hex (records signed before Ed25519)."""
    return hmac.new(key, canonical(value), hashlib.sha256).hexdigest()


def _signature(keys: RecordKeys, value: Any) -> dict[str, str]:
    signed = keys.signing.sign(canonical(value)).signature
    return {"algorithm": ALGORITHM, "key_id": keys.key_id, "value": signed.hex()}


def covered(record: dict[str, Any]) -> dict[str, Any]:
    """The part of a record its own signature covers."""
    return {k: v for k, v in record.items() if k not in _UNCOVERED}


def sign(body: dict[str, Any], keys: RecordKeys) -> dict[str, Any]:
    """``body`` with its signature."""
    return {
        **covered(body),
        "links": body.get("links", []),
        "signature": _signature(keys, covered(body)),
    }


def sign_link(link: dict[str, Any], keys: RecordKeys, at: datetime) -> dict[str, Any]:
    """``link``, appended ``at``, with a signature of its own over both:
    ``ed25519:<key id>:<signature, hex>``."""
    covers = {**link_body(link), "at": link_time(at)}
    signed = keys.signing.sign(canonical(covers)).signature
    return {**link, "signature": f"{LINK_PREFIX}{keys.key_id}:{signed.hex()}"}


def link_time(at: datetime) -> str:
    """When a link was appended, to the second, as its record shows and its signature covers."""
    return rfc3339(datetime.fromtimestamp(int(at.timestamp()), UTC)) or ""


@dataclass(frozen=True, slots=True)
class RecordCheck:
    """Whether a record is authentic, and if not, why."""

    valid: bool
    reason: str


def verify(data: bytes, public_key: bytes, legacy_key: bytes | None = None) -> RecordCheck:
    """Check a record file's bytes against a server's ``public_key`` (and, for a record
    signed before Ed25519, the shared ``legacy_key`` if one is known)."""
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        return RecordCheck(False, f"not a JSON record: {exc}")
    if not isinstance(record, dict) or not isinstance(record.get("signature"), dict):
        return RecordCheck(False, "no signature: this is not a watchkeeper execution record")
    signature = record["signature"]
    algorithm = signature.get("algorithm")
    if algorithm == LEGACY_ALGORITHM:
        return _verify_legacy(record, legacy_key)
    if algorithm != ALGORITHM:
        return RecordCheck(False, f"unknown signature algorithm {algorithm!r}")
    if signature.get("key_id") != key_id(public_key):
        return RecordCheck(False, "signed with another key (its key_id differs from this key's)")
    if not _signed_by(public_key, covered(record), signature):
        return RecordCheck(False, "the signature does not match: the record was changed")
    links = record.get("links", [])
    bad = [i for i, link in enumerate(links) if not _link_ok(public_key, link)]
    if bad:
        return RecordCheck(False, f"link {bad[0]} has a signature that does not match")
    job = record.get("job", {}).get("id")
    return RecordCheck(True, f"valid: job {job}, signed by {key_id(public_key)}")


def _signed_by(public_key: bytes, value: Any, signature: Any) -> bool:
    if not isinstance(signature, dict) or signature.get("algorithm") != ALGORITHM:
        return False
    try:
        VerifyKey(public_key).verify(canonical(value), bytes.fromhex(str(signature["value"])))
    except (BadSignatureError, KeyError, ValueError, TypeError):
        return False
    return True


def _link_ok(public_key: bytes, link: Any) -> bool:
    if not isinstance(link, dict):
        return False
    key, _, value = str(link.get("signature", "")).removeprefix(LINK_PREFIX).rpartition(":")
    signature = {"algorithm": ALGORITHM, "value": value}
    covers = {**link_body(link), "at": link.get("at")}
    return key == key_id(public_key) and _signed_by(public_key, covers, signature)


def _verify_legacy(record: dict[str, Any], key: bytes | None) -> RecordCheck:
    if key is None:
        why = (
            "signed with the server's old shared key (HMAC-SHA256): only the server holding "
            "it can check it (POST /api/v1/records/verify)"
        )
        return RecordCheck(False, why)
    signature = record["signature"]
    expected = mac(key, {k: v for k, v in record.items() if k != "signature"})
    if signature.get("key_id") != key_id(key):  # the old id hashed the secret the same way
        return RecordCheck(False, "signed with another key (its key_id differs from this key's)")
    if not hmac.compare_digest(expected, str(signature.get("value", ""))):
        return RecordCheck(False, "the signature does not match: the record was changed")
    for i, link in enumerate(record.get("links", [])):
        if not isinstance(link, dict) or not hmac.compare_digest(
            mac(key, link_body(link)), str(link.get("signature", ""))
        ):
            return RecordCheck(False, f"link {i} has a signature that does not match")
    job = record.get("job", {}).get("id")
    return RecordCheck(True, f"valid: job {job}, signed with the old key")


def link_body(link: dict[str, Any]) -> dict[str, Any]:
    """The part of a link its own signature covers."""
    return {k: link.get(k) for k in ("job_id", "kind", "url", "title", "actor", "detail")}


def with_links(
    record: dict[str, Any], job_id: str, links: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """A kept record with the links its job has now (each signed when it arrived)."""
    shown = [{**link, "job_id": job_id, "at": link_time(link["at"])} for link in links]
    return {**record, "links": shown}


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
    status = "deleted" if job is None else rollup.of_job(job).value
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


def same_timeline(kept: dict[str, Any], fresh: dict[str, Any]) -> bool:
    """Whether a kept record's rounds and spend are still what its events say."""
    return all(kept.get(part) == fresh.get(part) for part in ("rounds", "spend"))


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
            key, {"task_id": event.task_id, "round": event.round, "fingerprint": None, "phases": []}
        )
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
