"""Rows of the process tables as records, and the column expressions the parts share."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Row

from watchkeeper.records.procs import ACTIVE, Park, ParkState, ProcRun, run_from_columns
from watchkeeper.store.base import record_from_row
from watchkeeper.store.schema.procs import proc_runs

ACTIVE_STATUSES = [status.value for status in ACTIVE]
R = proc_runs.c


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
    return run_from_columns(row._mapping)


def park_from_row(row: Row[Any]) -> Park:
    """A ``proc_parks`` row as a record."""
    state = ParkState(row._mapping["state"])
    return record_from_row(Park, row, times=("parked_at", "woken_at"), state=state)
