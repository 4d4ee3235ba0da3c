"""``client.timeline``: timeline events, spend and execution records over the HTTP API.

::

    client.timeline.emit_batch([
        {"phase": "implementer", "task_id": task_id, "round": 1, "role": "implementer",
         "model": "claude-haiku-4-5", "provider": "anthropic",
         "input_tokens": 12_000, "cache_read_tokens": 9_000, "output_tokens": 800,
         "duration_s": 41.5, "outcome": "ok"},
        {"phase": "verify", "task_id": task_id, "round": 1, "outcome": "failed",
         "fingerprint": diff_and_result_hash},
    ])
    client.timeline.spend(by="model")["totals"]      # cost, calls, unpriced
    client.timeline.spend("day", since=date(2026, 1, 5), until=date(2026, 1, 11))  # a week
    record = client.timeline.record(job_id)          # signed; `watchkeeper verify-record`

A batch (up to 5,000 events) is stored all or nothing; a bad event raises
:class:`~watchkeeper.errors.ClientError` whose message names its index and
field. Batches are sent gzip-compressed. ``input_tokens`` counts every input
token, cached ones included.
"""

from __future__ import annotations

import builtins
import gzip
import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from watchkeeper.client.part import ApiPart
from watchkeeper.client.wire import segment
from watchkeeper.errors import ClientError

if TYPE_CHECKING:
    pass

MAX_BATCH = 5000


def _day_or_time(value: datetime | date | str | None) -> str | None:
    """A range end as the spend API reads it: a date as ``YYYY-MM-DD``, a time in RFC 3339."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    wired: str | None = _wire(value)
    return wired


def _wire(value: Any) -> Any:
    if not isinstance(value, datetime):
        return value
    # The clock module loads asyncio: only a batch that carries a datetime pays for it.
    from watchkeeper.clock import rfc3339

    return rfc3339(value)


class Timeline(ApiPart):
    """Emit timeline events; read timelines, spend and records."""

    def emit_batch(self, events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Store ``events`` (all or nothing); returns ``accepted``, ``cost`` and ``unpriced``."""
        if not events:
            return {"accepted": 0, "cost": 0.0, "unpriced": 0}
        if len(events) > MAX_BATCH:
            raise ClientError(
                0, "too_many", f"{len(events)} events: send at most {MAX_BATCH} per batch"
            )
        body = {
            "events": [
                {key: _wire(value) for key, value in event.items() if value is not None}
                for event in events
            ]
        }
        data = gzip.compress(json.dumps(body, separators=(",", ":")).encode(), compresslevel=5)
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        return self._client.request_object(
            "POST", "/api/v1/events/batch", content=data, headers=headers
        )

    def emit(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Store one event."""
        return self.emit_batch([event])

    def events(
        self, *, job_id: str | None = None, task_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        """Events of a job or a task, oldest first."""
        params = {k: v for k, v in {"job_id": job_id, "task_id": task_id}.items() if v}
        result = self._client.request("GET", "/api/v1/timeline", params=params)
        found: builtins.list[dict[str, Any]] = result["events"]
        return found

    def last_progress_at(self, task_id: str) -> str | None:
        """When the task last made progress by its timeline (RFC 3339), or ``None``."""
        result = self._client.request("GET", "/api/v1/timeline", params={"task_id": task_id})
        found: str | None = result.get("last_progress_at")
        return found

    def spend(
        self,
        by: str = "model",
        *,
        org: str | None = None,
        job_id: str | None = None,
        since: datetime | date | str | None = None,
        until: datetime | date | str | None = None,
    ) -> dict[str, Any]:
        """Spend grouped by org, job, role, model, provider or day, with totals.

        ``since`` and ``until`` narrow it to the calls made within a range: a date is a
        whole UTC day (``until`` counts that day too), a time that instant (``until`` is
        left out); text is sent as it is (``"2026-01-05"``, ``"2026-01-05T12:00:00Z"``).
        """
        params: dict[str, Any] = {"by": by}
        optional = {
            "org": org,
            "job_id": job_id,
            "since": _day_or_time(since),
            "until": _day_or_time(until),
        }
        params.update({key: value for key, value in optional.items() if value is not None})
        return self._client.request_object("GET", "/api/v1/spend", params=params)

    def record(self, job_id: str) -> dict[str, Any]:
        """The signed execution record of a finished job."""
        return self._client.request_object("GET", f"/api/v1/jobs/{segment(job_id)}/record")
