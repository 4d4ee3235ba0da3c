"""Rows of the process tables as records, and the column expressions the parts share."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Row

from watchkeeper.records.procs import ACTIVE, HookState, Park, ParkState, ProcRun, ProcStatus
from watchkeeper.store.base import record_from_row
from watchkeeper.store.schema_procs import proc_runs

ACTIVE_STATUSES = [status.value for status in ACTIVE]
R = proc_runs.c
_RUN_TIMES = (
    "created_at",
    "started_at",
    "progress_at",
    "finished_at",
    "updated_at",
    "abort_requested_at",
)


def kept_by(engine_key: str) -> ColumnElement[bool]:
    """The runs the engine of ``engine_key`` (``<host>:<data folder>``) settles.

    Its own, and those recorded before runs named their data folder: their key
    is the bare host (the key up to its first colon), and every engine of that
    host settles them, as it did then.
    """
    bare_host = engine_key.split(":", 1)[0]
    return R.engine_key.in_([engine_key, bare_host])


def run_from_row(row: Row[Any]) -> ProcRun:
    """A full ``proc_runs`` row as a record."""
    m = row._mapping
    return record_from_row(
        ProcRun,
        row,
        times=_RUN_TIMES,
        argv=tuple(m["argv"]),
        user=m["username"],
        status=ProcStatus(m["status"]),
        detach=bool(m["detach"]),
        hook_state=HookState(m["hook_state"]),
    )


def park_from_row(row: Row[Any]) -> Park:
    """A ``proc_parks`` row as a record."""
    state = ParkState(row._mapping["state"])
    return record_from_row(Park, row, times=("parked_at", "woken_at"), state=state)
