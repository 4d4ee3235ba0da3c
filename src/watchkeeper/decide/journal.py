"""Start-up reconciliation of the action journal: a ``started`` action that lost its process
becomes ``interrupted`` and is never run again."""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime, timedelta

import psutil

from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionRecord

log = logging.getLogger(__name__)
INTERRUPTED_NOTE = "the action was interrupted: check the work before acting again"
#: An action started on another host is taken as lost after this long.
FOREIGN_GRACE = timedelta(hours=1)


def _process_gone(record: ActionRecord) -> bool:
    if record.pid == os.getpid():
        return False
    try:
        process = psutil.Process(record.pid)
        # A pid recycled after the action started belongs to someone else.
        return process.create_time() > record.started_at.timestamp()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def recover_interrupted(store: Store, now: datetime, host: str | None = None) -> list[int]:
    """Mark lost ``started`` actions interrupted; returns their ids."""
    here = host or socket.gethostname()
    marked = []
    for record in store.decisions.started_actions():
        lost = (
            _process_gone(record)
            if record.host == here
            else now - record.started_at > FOREIGN_GRACE
        )
        if lost and store.decisions.interrupt(record.id, now, INTERRUPTED_NOTE):
            log.warning(
                "Action %d (%s on %s %s) was interrupted", record.id, record.action, record.kind,
                record.run_id, extra={"action": "recover_actions"},
            )  # fmt: skip
            marked.append(record.id)
    return marked
