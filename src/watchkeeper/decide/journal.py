"""Reconciliation of the action journal: a ``started`` action that lost its process becomes
``interrupted`` and is never run again.

An action journalled with the replica that ran it is lost once that replica's
heartbeat lapses, whichever host it ran on; the leader checks at every sweep.
Rows written before replicas were named keep the host and pid rule.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from datetime import datetime, timedelta

import psutil

from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionRecord

log = logging.getLogger(__name__)
INTERRUPTED_NOTE = "the action was interrupted: check the work before acting again"
#: An action started on another host, by no named replica, is taken as lost after this long.
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


def _lost(
    record: ActionRecord,
    now: datetime,
    live: set[str] | None,
    replica: str | None,
    here: str,
    within: timedelta,
) -> bool:
    if record.replica is not None and record.replica == replica:
        return False
    if record.replica is not None and live is not None:
        # Writing the row was a sign of life too: a replica may act before its first beat.
        return record.replica not in live and now - record.started_at > within
    if record.host == here:
        return _process_gone(record)
    return now - record.started_at > FOREIGN_GRACE


def _mark(
    store: Store,
    started: Sequence[ActionRecord],
    now: datetime,
    live: set[str] | None,
    replica: str | None,
    host: str | None,
    within: timedelta,
) -> list[int]:
    here = host or socket.gethostname()
    marked = []
    for record in started:
        if not _lost(record, now, live, replica, here, within):
            continue
        if store.decisions.interrupt(record.id, now, INTERRUPTED_NOTE):
            log.warning(
                "Action %d (%s on %s %s, replica %s) was interrupted",
                record.id,
                record.action,
                record.kind,
                record.run_id,
                record.replica or "unnamed",
                extra={"action": "recover_actions"},
            )
            marked.append(record.id)
    return marked


def recover_interrupted(
    store: Store,
    now: datetime,
    live: set[str] | None = None,
    *,
    replica: str | None = None,
    host: str | None = None,
    within: timedelta = timedelta(0),
) -> list[int]:
    """Mark lost ``started`` actions interrupted; returns their ids.

    ``live`` names the replicas with a fresh heartbeat: an action journalled
    by any other replica (save ``replica``, this process's own) is lost, unless
    it started less than ``within`` ago. Without ``live``, and for rows that
    name no replica, an action is lost when its process is gone from this
    host, or when it started on another host longer than ``FOREIGN_GRACE`` ago.
    """
    started = store.decisions.started_actions()
    return _mark(store, started, now, live, replica, host, within)


def recover_abandoned(store: Store, now: datetime, *, within: timedelta, replica: str) -> list[int]:
    """The leader's check at each sweep: actions whose replica's heartbeat is older than
    ``within`` become interrupted; returns their ids.

    One read of the started actions; the heartbeats are read only when some of
    them belong to another replica.
    """
    started = store.decisions.started_actions()
    if not started:
        return []
    others = any(r.replica is not None and r.replica != replica for r in started)
    live = store.cluster.live(now, within) if others else set()
    return _mark(store, started, now, live, replica, None, within)
