"""Forge webhooks: GitHub merges link to execution records; Linear issues become jobs.

GitHub (``pull_request``, ``action=closed``, ``merged=true``): a pull request
whose title, body or branch names a job (``wk-job:<id>``, ``wk-job/<id>`` in
a branch name, or the first group of ``[forge] job_pattern``) appends a
signed merge link, with who merged it, to that job's record. The request must
carry ``X-Hub-Signature-256``: ``sha256=`` and the HMAC-SHA256 of the raw
body with ``[forge] github_secret``.

Linear (``Issue`` created or updated): an issue labelled ``[forge]
linear_label`` or in the state "In Progress" becomes a job, submitted through
the queue's own :meth:`~watchkeeper.queue.service.QueueService.submit`, once
per issue. ``Linear-Signature`` must be the hex HMAC-SHA256 of the raw body
with ``[forge] linear_secret``, and ``webhookTimestamp`` at most 60 s old.

A request that is unsigned, forged or stale is refused (401) before anything
is read from it, and changes nothing. Deliveries are handled once each, known
by the SHA-256 digest of the body: what the signature covers. The delivery
headers (``X-GitHub-Delivery``, ``Linear-Delivery``) are not signed, so a
signed body sent again under a new delivery id is still the same delivery; the
GitHub delivery id is kept on the merge link for display only. A merged pull
request is known by what it is, its repository, number and merge commit
(:mod:`watchkeeper.store.forge_keys`): the same merge in other bytes (another
webhook, other formatting) links each job it names once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from watchkeeper.clock import Now, utcnow
from watchkeeper.config import ForgeConfig, resolve_secret
from watchkeeper.errors import WatchkeeperError
from watchkeeper.store.forge_keys import merge_delivery_id, merge_link_id
from watchkeeper.timeline import reviews
from watchkeeper.timeline.record import RecordKeys, sign_link

if TYPE_CHECKING:
    from watchkeeper.store.timeline import TimelineStore

log = logging.getLogger(__name__)
MAX_AGE_S = 60.0
IN_PROGRESS = "in progress"
#: Submits a job: ``(title, payload) -> job id``; the queue's own submit, bound to an org/fleet.
Submit = Callable[[str, dict[str, Any]], str]


class Refused(WatchkeeperError):
    """The request is not signed by the forge (or is stale): 401, nothing changes."""

    http_status = 401
    code = "unauthorized"


class NotConfigured(WatchkeeperError):
    """The webhook's secret is not configured: the endpoint is off."""

    http_status = 404
    code = "not_configured"


@dataclass(frozen=True, slots=True)
class Answer:
    """What a webhook did, as the forge is told (always 200 once authentic)."""

    outcome: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The response body."""
        return {"outcome": self.outcome, **self.detail}


def check_hmac(secret: str, body: bytes, given: str | None, *, prefix: str = "") -> None:
    """Raise :class:`Refused` unless ``given`` is ``prefix`` + hex HMAC-SHA256 of ``body``."""
    if not given:
        raise Refused("the request is not signed")
    expected = prefix + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), given.strip().lower().encode()):
        raise Refused("the signature does not match the body")


def body_digest(body: bytes) -> str:
    """What a delivery is known by: the hex SHA-256 of the signed body."""
    return hashlib.sha256(body).hexdigest()


def job_refs(pattern: str, *texts: str | None) -> list[str]:
    """Job ids named in ``texts``, in order, once each."""
    compiled = re.compile(pattern)
    found: list[str] = []
    for text in texts:
        for match in compiled.finditer(text or ""):
            if match.group(1) not in found:
                found.append(match.group(1))
    return found


def payload_of(body: bytes) -> dict[str, Any]:
    """The JSON object of an authentic body; :class:`Refused` when it is not one."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        payload = None
    if not isinstance(payload, dict):
        raise Refused("the body is not a JSON object")
    return payload


class Forge:
    """Handles authentic forge deliveries against the timeline store and the queue."""

    def __init__(
        self,
        store: TimelineStore,
        config: ForgeConfig,
        key: RecordKeys,
        *,
        submit: Submit | None = None,
        clock: Now = utcnow,
    ) -> None:
        self.store = store
        self.config = config
        self.key = key
        self.submit = submit
        self.clock = clock

    def _secret(self, name: str) -> str:
        secret = resolve_secret(
            getattr(self.config, name), getattr(self.config, f"{name}_env"), f"forge.{name}"
        )
        if not secret:
            raise NotConfigured(f"set [forge] {name} (or {name}_env) to receive this webhook")
        return secret

    # GitHub --------------------------------------------------------------------------

    def github(self, headers: Mapping[str, str], body: bytes) -> Answer:
        """Handle one GitHub delivery (headers with lower-case names)."""
        secret = self._secret("github_secret")
        check_hmac(secret, body, headers.get("x-hub-signature-256"), prefix="sha256=")
        payload = payload_of(body)
        event = headers.get("x-github-event", "")
        digest = body_digest(body)
        delivery = headers.get("x-github-delivery") or digest
        if event == "ping":
            return Answer("pong")
        pr = payload.get("pull_request")
        if event != "pull_request" or payload.get("action") != "closed" or not isinstance(pr, dict):
            return Answer("ignored", {"reason": f"not a closed pull request ({event})"})
        if not pr.get("merged"):
            return Answer("ignored", {"reason": "closed without merging"})
        refs = job_refs(
            self.config.job_pattern, pr.get("title"), pr.get("body"), dig(pr, "head", "ref")
        )
        known = [job_id for job_id in refs if self.store.job_known(job_id)]
        now = self.clock()
        links = [self._merge_link(job_id, pr, payload, delivery[:200], now) for job_id in known]
        merge = merge_delivery_id(
            dig(payload, "repository", "full_name"), pr.get("number"), pr.get("merge_commit_sha")
        )
        linked = self._record_merge(merge, digest, known, links, now)
        if linked is None:
            return Answer("duplicate", {"delivery": delivery})
        log.info(
            "Linked merged pull request %s to job(s) %s",
            pr.get("html_url"),
            ", ".join(linked) or "none",
            extra={"action": "forge_github"},
        )
        unknown = [job_id for job_id in refs if job_id not in known]
        return Answer("linked", {"jobs": linked, "unknown_jobs": unknown})

    def _record_merge(
        self,
        merge: str | None,
        digest: str,
        known: list[str],
        links: list[dict[str, Any]],
        now: datetime,
    ) -> list[str] | None:
        """Append each job's link to the merge once; the jobs linked now, ``None`` if none new.

        ``merge`` is what the merge is known by (repository, number, merge commit), and a
        job's link to it by that and the job: the same merge in other bytes links nothing
        more. A delivery that does not say all three (``None``) is known by its body.
        """
        if merge is None:
            return known if self.store.record_links("github", digest, links, now) else None
        new_merge = self.store.record_links("github", merge, [], now)
        linked = [
            job_id
            for job_id, link in zip(known, links, strict=True)
            if self.store.record_links("github", merge_link_id(merge, job_id), [link], now)
        ]
        return linked if new_merge or linked else None

    def _merge_link(
        self,
        job_id: str,
        pr: dict[str, Any],
        payload: dict[str, Any],
        delivery: str,
        at: datetime,
    ) -> dict[str, Any]:
        link = {
            "job_id": job_id,
            "kind": "merge",
            "url": str(pr.get("html_url") or "")[:2000],
            "title": str(pr.get("title") or "")[:500],
            "actor": dig(pr, "merged_by", "login") or dig(payload, "sender", "login"),
            "detail": {
                "repository": dig(payload, "repository", "full_name"),
                "number": pr.get("number"),
                "merged_at": pr.get("merged_at"),
                "merge_commit_sha": pr.get("merge_commit_sha"),
                "branch": dig(pr, "head", "ref"),
                "delivery": delivery,
                **self._approvals(dig(payload, "repository", "full_name"), pr.get("number")),
            },
        }
        return sign_link(link, self.key, at)

    def _approvals(self, repository: Any, number: Any) -> dict[str, Any]:
        """``approved_by`` (who approved, from the reviews), or why it could not be read."""
        token = resolve_secret(
            self.config.github_token, self.config.github_token_env, "forge.github_token"
        )
        if not token:
            why = "set [forge] github_token_env to a token that may read pull requests"
            return {"approved_by": None, "approvals_unread": why}
        if not isinstance(repository, str) or not isinstance(number, int):
            return {"approved_by": None, "approvals_unread": "the delivery names no pull request"}
        try:
            found = reviews.approvers(self.config.github_api_url, token, repository, number)
        except reviews.ReviewsUnread as exc:
            log.warning(
                "Could not read who approved %s#%s: %s",
                repository,
                number,
                exc,
                extra={"action": "forge_github"},
            )
            return {"approved_by": None, "approvals_unread": str(exc)}
        return {"approved_by": found}

    # Linear --------------------------------------------------------------------------

    def linear(self, headers: Mapping[str, str], body: bytes) -> Answer:
        """Handle one Linear delivery (headers with lower-case names)."""
        secret = self._secret("linear_secret")
        check_hmac(secret, body, headers.get("linear-signature"))
        payload = payload_of(body)
        self._fresh(payload.get("webhookTimestamp"))
        data = payload.get("data")
        if payload.get("type") != "Issue" or not isinstance(data, dict) or not data.get("id"):
            return Answer("ignored", {"reason": f"not an issue ({payload.get('type')})"})
        if payload.get("action") not in ("create", "update"):
            return Answer("ignored", {"reason": f"issue {payload.get('action')}"})
        if not self._wanted(data):
            return Answer("ignored", {"reason": "not labelled for watchkeeper nor in progress"})
        return self._request(body_digest(body), data)

    def _fresh(self, stamp: Any) -> None:
        if not isinstance(stamp, int | float) or isinstance(stamp, bool):
            raise Refused("webhookTimestamp is missing")
        age = self.clock().timestamp() - stamp / 1000.0
        if abs(age) > MAX_AGE_S:
            raise Refused(f"webhookTimestamp is {age:.0f} s old: at most {MAX_AGE_S:.0f} s")

    def _wanted(self, data: dict[str, Any]) -> bool:
        labels = data.get("labels")
        names = {
            str(label.get("name", "")).lower()
            for label in (labels if isinstance(labels, list) else [])
            if isinstance(label, dict)
        }
        state = str(dig(data, "state", "name") or "").lower()
        return self.config.linear_label.lower() in names or state == IN_PROGRESS

    def _request(self, delivery: str, data: dict[str, Any]) -> Answer:
        issue_id = str(data["id"])
        identifier = str(data.get("identifier") or issue_id)
        title = f"{identifier}: {data.get('title') or 'Linear issue'}"[:500]
        detail = {"identifier": identifier, "url": data.get("url"), "issue_id": issue_id}
        now = self.clock()
        claimed = self.store.claim_request("linear", delivery, issue_id, title, detail, now)
        if claimed != "new":
            return Answer(claimed, {"issue": identifier})
        if self.submit is None or not self.config.linear_argv:
            reason = "no job is submitted until [forge] linear_argv names the command to run"
            self.store.settle_request("linear", issue_id, job_id=None, reason=reason, now=now)
            return Answer("pending", {"issue": identifier, "reason": reason})
        argv = [part.format_map(Fill(detail)) for part in self.config.linear_argv]
        try:
            job_id = self.submit(title, {"argv": argv, "linear": detail})
        except Exception:
            self.store.forget_request("linear", delivery, issue_id)  # let Linear's retry try again
            raise
        self.store.settle_request("linear", issue_id, job_id=job_id, reason=None, now=now)
        log.info(
            "Linear issue %s became job %s", identifier, job_id, extra={"action": "forge_linear"}
        )
        return Answer("submitted", {"issue": identifier, "job_id": job_id})


class Fill(dict[str, Any]):
    """Fills a command's named fields (``{identifier}``, ``{url}``...); others stay as written."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def dig(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def now_ms(now: datetime) -> int:
    """``now`` as Linear writes ``webhookTimestamp``."""
    return int(now.timestamp() * 1000)
