"""Sentry webhooks: an error tracker's issue becomes a job to triage; a regression reopens it.

Sentry's integration platform signs each delivery: ``Sentry-Hook-Signature`` is the hex
HMAC-SHA256 of the raw body with the integration's client secret (``[forge]
sentry_secret``), ``Sentry-Hook-Timestamp`` the second it was sent (at most
:data:`MAX_AGE_S` away from the server's clock) and ``Sentry-Hook-Resource`` what it is
about. An unsigned, forged or stale delivery is refused (401) before anything is read from
it. Deliveries are known by the digest of the signed body, so a replay is handled once.

- ``event_alert`` (an issue alert rule fired) and ``issue`` ``created``: the issue becomes
  one job on ``sentry_fleet`` for ``sentry_org``, running ``sentry_argv`` (``{issue_id}``,
  ``{short_id}`` and ``{url}`` filled in). Its task's input names the issue: title,
  culprit, permalink, level, project and a stack excerpt, redacted. Every later delivery
  about the same issue is ``known``: one issue, one job.
- ``issue`` ``unresolved`` with the substatus ``regressed``: the issue's job gets a
  continuation task (the queue's own resume) once its tasks have ended; while one still
  runs the answer is ``open``.
- Everything else (installations, comments, resolutions...) is ``ignored``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from watchkeeper.clock import Now, utcnow
from watchkeeper.config import ForgeConfig, resolve_secret
from watchkeeper.errors import Conflict
from watchkeeper.redact import redact
from watchkeeper.timeline.forge import (
    Answer,
    Fill,
    NotConfigured,
    Refused,
    Submit,
    body_digest,
    check_hmac,
    dig,
    payload_of,
)

if TYPE_CHECKING:
    from watchkeeper.store.timeline import TimelineStore

log = logging.getLogger(__name__)
SOURCE = "sentry"
#: Sentry sends at once; five minutes covers clock skew between the two hosts.
MAX_AGE_S = 300.0
#: Frames of the stack kept for the task's input: the innermost, where it broke.
STACK_FRAMES = 12
STACK_CHARS = 4000
#: Adds a continuation task to an ended job: the queue's resume, ``(job id, payload) -> task id``.
Resume = Callable[[str, dict[str, Any]], str]


class Sentry:
    """Handles authentic Sentry deliveries against the forge requests and the queue."""

    def __init__(
        self,
        store: TimelineStore,
        config: ForgeConfig,
        *,
        submit: Submit,
        resume: Resume,
        clock: Now = utcnow,
    ) -> None:
        self.store = store
        self.config = config
        self.submit = submit
        self.resume = resume
        self.clock = clock

    def handle(self, headers: Mapping[str, str], body: bytes) -> Answer:
        """Handle one delivery (headers with lower-case names)."""
        secret = resolve_secret(
            self.config.sentry_secret, self.config.sentry_secret_env, "forge.sentry_secret"
        )
        if not secret:
            raise NotConfigured("set [forge] sentry_secret (or sentry_secret_env) to receive this")
        check_hmac(secret, body, headers.get("sentry-hook-signature"))
        self._fresh(headers.get("sentry-hook-timestamp"))
        payload = payload_of(body)
        resource = headers.get("sentry-hook-resource", "")
        action = payload.get("action")
        issue = _issue_of(resource, payload)
        if issue is None:
            return Answer("ignored", {"reason": f"not an issue to triage ({resource} {action})"})
        if resource == "issue" and action == "unresolved":
            if issue.get("substatus") != "regressed":
                return Answer("ignored", {"reason": "unresolved, not a regression"})
            return self._reopen(body_digest(body), issue)
        if not (resource == "event_alert" or action == "created"):
            return Answer("ignored", {"reason": f"issue {action}"})
        return self._request(body_digest(body), issue)

    def _fresh(self, stamp: str | None) -> None:
        try:
            sent = float(stamp or "")
        except ValueError:
            raise Refused("Sentry-Hook-Timestamp is missing") from None
        age = self.clock().timestamp() - sent
        if abs(age) > MAX_AGE_S:
            raise Refused(f"Sentry-Hook-Timestamp is {age:.0f} s old: at most {MAX_AGE_S:.0f} s")

    def _request(self, delivery: str, issue: dict[str, Any]) -> Answer:
        title = f"{issue['short_id'] or issue['issue_id']}: {issue['title']}"[:500]
        now = self.clock()
        claimed = self.store.claim_request(SOURCE, delivery, issue["issue_id"], title, issue, now)
        if claimed != "new":
            return Answer(claimed, {"issue": issue["issue_id"]})
        if not self.config.sentry_argv:
            reason = "no job is submitted until [forge] sentry_argv names the command to run"
            self.store.settle_request(
                SOURCE, issue["issue_id"], job_id=None, reason=reason, now=now
            )
            return Answer("pending", {"issue": issue["issue_id"], "reason": reason})
        try:
            job_id = self.submit(title, self._payload(issue))
        except Exception:
            self.store.forget_request(SOURCE, delivery, issue["issue_id"])  # a retry may succeed
            raise
        self.store.settle_request(SOURCE, issue["issue_id"], job_id=job_id, reason=None, now=now)
        log.info(
            "Sentry issue %s became job %s", issue["issue_id"], job_id, extra={"action": "sentry"}
        )
        return Answer("submitted", {"issue": issue["issue_id"], "job_id": job_id})

    def _reopen(self, delivery: str, issue: dict[str, Any]) -> Answer:
        now = self.clock()
        title = f"{issue['short_id'] or issue['issue_id']}: {issue['title']}"[:500]
        claimed = self.store.claim_request(SOURCE, delivery, issue["issue_id"], title, issue, now)
        if claimed == "duplicate":
            return Answer("duplicate", {"issue": issue["issue_id"]})
        if claimed == "new":  # a regression of an issue never triaged here: triage it now
            self.store.forget_request(SOURCE, delivery, issue["issue_id"])
            return self._request(delivery, issue)
        job_id = self._job_of(issue["issue_id"])
        if job_id is None:
            return Answer("pending", {"issue": issue["issue_id"], "reason": "it has no job yet"})
        try:
            task_id = self.resume(job_id, self._payload({**issue, "regressed": True}))
        except Conflict:
            return Answer("open", {"issue": issue["issue_id"], "job_id": job_id})
        log.info(
            "Sentry issue %s regressed: job %s reopened",
            issue["issue_id"],
            job_id,
            extra={"action": "sentry"},
        )
        return Answer("reopened", {"issue": issue["issue_id"], "job_id": job_id, "task": task_id})

    def _job_of(self, issue_id: str) -> str | None:
        for request in self.store.requests(SOURCE):
            if request["external_id"] == issue_id:
                return request.get("job_id")
        return None

    def _payload(self, issue: dict[str, Any]) -> dict[str, Any]:
        fill = Fill(
            {
                "issue_id": issue["issue_id"],
                "short_id": issue["short_id"] or "",
                "url": issue["permalink"] or "",
            }
        )
        argv = [part.format_map(fill) for part in self.config.sentry_argv]
        return {"argv": argv, "sentry": {"regressed": False, **issue}}


def _issue_of(resource: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The issue a delivery is about, as the task's input shows it; ``None``: not one."""
    if resource == "event_alert":
        event = dig(payload, "data", "event")
        if not isinstance(event, dict) or not event.get("issue_id"):
            return None
        return _shown(
            issue_id=event["issue_id"],
            short_id=None,
            title=event.get("title"),
            culprit=event.get("culprit"),
            permalink=_issue_link(event.get("web_url")),
            level=event.get("level"),
            project=event.get("project"),
            stack=_stack(event),
        )
    if resource == "issue":
        issue = dig(payload, "data", "issue")
        if not isinstance(issue, dict) or not issue.get("id"):
            return None
        found = issue.get("metadata")
        metadata: dict[str, Any] = found if isinstance(found, dict) else {}
        return _shown(
            issue_id=issue["id"],
            short_id=issue.get("shortId"),
            title=issue.get("title"),
            culprit=issue.get("culprit"),
            permalink=issue.get("permalink") or issue.get("web_url"),
            level=issue.get("level"),
            project=dig(issue, "project", "slug"),
            stack=" ".join(str(metadata.get(k) or "") for k in ("type", "value")).strip(),
            substatus=issue.get("substatus"),
        )
    return None


def _shown(**fields: Any) -> dict[str, Any]:
    """The fields as text, capped and redacted: they come from a third party's payload."""
    shown: dict[str, Any] = {}
    for name, value in fields.items():
        cap = STACK_CHARS if name == "stack" else 2000
        shown[name] = None if value is None else redact(str(value))[:cap]
    return shown


def _issue_link(event_url: Any) -> str | None:
    """The issue's page from an event's: ``.../issues/ID/events/EVENT/`` less the event."""
    if not isinstance(event_url, str):
        return None
    head, found, _ = event_url.partition("/events/")
    return head + "/" if found else event_url


def _stack(event: dict[str, Any]) -> str:
    """The innermost frames of the event's last exception, one line each."""
    values = dig(event, "exception", "values")
    if not isinstance(values, list) or not values or not isinstance(values[-1], dict):
        return ""
    last = values[-1]
    frames = dig(last, "stacktrace", "frames")
    lines = [f"{last.get('type', '')}: {last.get('value', '')}".strip(": ")]
    for frame in (frames if isinstance(frames, list) else [])[-STACK_FRAMES:]:
        if not isinstance(frame, dict):
            continue
        where = f"{frame.get('filename')}:{frame.get('lineno')} in {frame.get('function')}"
        code = str(frame.get("context_line") or "").strip()
        lines.append(f"  {where}" + (f"\n    {code}" if code else ""))
    return "\n".join(lines)
