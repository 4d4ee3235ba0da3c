"""Job control: cancel, retry and delete, each saying how many tasks it affected.

Cancelling a running task revokes its lease in the same statement: the
runner's next renewal fails and it aborts the subprocess. Asking again is
harmless: a job whose tasks all finished cancels nothing and says 0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watchkeeper.store.queue import QueueStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Controlled:
    """What one control action did."""

    action: str
    job_id: str | None
    affected: int
    task_ids: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """As the API answers."""
        return {
            "action": self.action,
            "job_id": self.job_id,
            "affected": self.affected,
            "task_ids": list(self.task_ids),
        }


def cancel(store: QueueStore, job_id: str, now: datetime) -> Controlled:
    """Cancel every unfinished task of the job."""
    ids = store.cancel(now, job_id=job_id)
    _log("cancel", job_id, len(ids))
    return Controlled("cancel", job_id, len(ids), tuple(ids))


def retry(store: QueueStore, job_id: str, now: datetime) -> Controlled:
    """Queue the job's failed, cancelled and stuck tasks again with fresh attempts."""
    ids = store.retry(now, job_id=job_id)
    _log("retry", job_id, len(ids))
    return Controlled("retry", job_id, len(ids), tuple(ids))


def delete(store: QueueStore, job_id: str) -> Controlled:
    """Delete the job and its tasks; refused while a task runs (cancel first)."""
    count = store.delete(job_id)
    _log("delete", job_id, count)
    return Controlled("delete", job_id, count)


def cancel_task(store: QueueStore, task_id: str, now: datetime) -> Controlled:
    """Cancel one task (an incident's Cancel button)."""
    ids = store.cancel(now, task_ids=[task_id])
    _log("cancel", task_id, len(ids))
    return Controlled("cancel", None, len(ids), tuple(ids))


def retry_task(store: QueueStore, task_id: str, now: datetime) -> Controlled:
    """Run one task again (an incident's Retry button): a running one loses its lease first."""
    revoked = store.cancel(now, task_ids=[task_id])
    ids = store.retry(now, task_ids=[task_id])
    _log("retry", task_id, len(ids))
    return Controlled("retry", None, len(ids), tuple(dict.fromkeys([*revoked, *ids])))


def _log(action: str, target: str, count: int) -> None:
    log.info(
        "%s %s: %d task(s) affected",
        action.capitalize(),
        target,
        count,
        extra={"action": f"queue_{action}"},
    )
