"""Start-up reconciliation of the queue: mark the tasks a restart interrupted.

When the server starts, every task still ``running`` was mid-turn when the
server (or its runner) went away. Each gets ``interrupted_at`` (RFC 3339 UTC)
in its metadata; the task's API form says ``interrupted: true`` while it is
there. Queued, stuck and finished tasks are not marked; deleted ones are gone.
A task already marked keeps its first marker, however often the server
restarts. The marker clears when the task is leased or renewed again
(``QueueService.lease`` and ``renew``), which publishes ``task.updated`` on ``/api/v1/events``.

Marking is best effort: a failed write is logged and start-up goes on.
"""

from __future__ import annotations

import logging
from datetime import datetime

from watchkeeper.store import Store
from watchkeeper.store.queue import QueueStore

log = logging.getLogger(__name__)


def mark_interrupted(store: Store, now: datetime) -> list[str]:
    """Mark the tasks that were running when this process started; their ids."""
    try:
        marked = QueueStore(store.engine).mark_interrupted(now)
    except Exception as exc:  # noqa: BLE001 - start-up must go on whatever the store says
        log.warning(
            "Could not mark interrupted tasks at start-up: %s",
            exc,
            extra={"action": "queue_mark_interrupted"},
        )
        return []
    if marked:
        log.info(
            "Marked %d task(s) interrupted by the restart",
            len(marked),
            extra={"action": "queue_mark_interrupted"},
        )
    return marked
