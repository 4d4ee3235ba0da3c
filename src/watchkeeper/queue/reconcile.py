"""Start-up reconciliation of the queue: mark the tasks whose runner is gone.

When the server starts, a task still ``running`` was interrupted only if its
runner is gone: its lease lapsed, or its runner's heartbeat is lost by the
queue's own liveness rule (:func:`watchkeeper.queue.rules.runner_alive`: no
heartbeat within ``queue.runner_offline_after_s``, or stopped), or no
registered runner holds it. Each such task gets ``interrupted_at`` (RFC 3339
UTC) in its metadata; the task's API form says ``interrupted: true`` while it
is there. A task a live runner holds is never marked: with several replicas on
one store, a restarting replica leaves the tasks of the runners another
replica serves alone. Queued, stuck and finished tasks are not marked; deleted
ones are gone. A task already marked keeps its first marker, however often the
server restarts. The marker clears when the task is leased or renewed again
(``QueueService.lease`` and ``renew``), which publishes ``task.updated`` on
``/api/v1/events``.

Start-up also forgets the runners gone (stopped, or silent) longer than
:data:`watchkeeper.store.queue.runners.RUNNER_RETENTION`, as registering a
runner does; a runner a task still names running is kept.

Marking and pruning are best effort: a failed write is logged and start-up goes on.
"""

from __future__ import annotations

import logging
from datetime import datetime

from watchkeeper.queue.rules import Policy, runner_alive
from watchkeeper.store import Store
from watchkeeper.store.queue import QueueStore

log = logging.getLogger(__name__)


def mark_interrupted(store: Store, now: datetime, policy: Policy | None = None) -> list[str]:
    """Mark the running tasks whose runner is gone at ``now``; their ids.

    ``policy`` gives the offline window of the liveness rule (the queue's
    configured one; the default window without it).
    """
    policy = policy or Policy()
    queue = QueueStore(store.engine)
    _prune(queue, now)
    try:
        gone = [
            runner.id
            for runner in queue.runners(include_stopped=True)
            if not runner_alive(runner, now, policy)
        ]
        marked = queue.mark_interrupted(now, gone)
    except Exception as exc:  # noqa: BLE001 - start-up must go on whatever the store says
        log.warning(
            "Could not mark interrupted tasks at start-up: %s",
            exc,
            extra={"action": "queue_mark_interrupted"},
        )
        return []
    if marked:
        log.info(
            "Marked %d task(s) of gone runners interrupted by the restart",
            len(marked),
            extra={"action": "queue_mark_interrupted"},
        )
    return marked


def _prune(queue: QueueStore, now: datetime) -> None:
    try:
        pruned = queue.prune_runners(now)
    except Exception as exc:  # noqa: BLE001 - start-up must go on whatever the store says
        log.warning(
            "Could not forget runners long gone at start-up: %s",
            exc,
            extra={"action": "queue_prune_runners"},
        )
        return
    if pruned:
        log.info(
            "Forgot %d runner(s) gone longer than the retention",
            pruned,
            extra={"action": "queue_prune_runners"},
        )
