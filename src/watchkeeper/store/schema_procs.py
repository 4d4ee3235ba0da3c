"""Tables of the processes watchkeeper starts (``procs/``), on the shared ``metadata``.

A run row is written before its command starts; its owner columns (host, boot
id, pids and their start times) are filled once the shim reports them. Hook
and wake columns are journals: they only move forward, one conditional update
per move.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Table,
)

from watchkeeper.store import schema_columns as col

proc_runs = Table(
    "proc_runs",
    col.metadata,
    col.key("run_id", 64),
    col.string("name", 200, nullable=False),
    col.json("argv", nullable=False),
    col.string("cwd", 4096, nullable=False),
    col.string("host", 255, nullable=False),
    col.string("username", 100, nullable=False),
    col.string("boot_id", 64),
    col.string("status", 16, nullable=False),
    col.flag("detach", default=False),
    # The shim owns the run: it is the process whose death without a witness means stale.
    col.integer("shim_pid"),
    col.string("shim_start", 40),
    # The command itself leads its own process group; abort signals that group.
    col.integer("pid"),
    col.string("pid_start", 40),
    col.integer("pgid"),
    col.number("budget_s"),
    col.number("timeout_s"),
    col.json("origin"),
    col.string("session", 200),
    col.string("on_done_cmd", 4000),
    col.string("on_done_url", 2000),
    col.epoch("created_at", nullable=False),
    col.epoch("started_at"),
    col.epoch("progress_at"),
    col.epoch("finished_at"),
    col.epoch("updated_at", nullable=False),
    col.epoch("abort_requested_at"),
    col.integer("exit_code"),
    col.integer("signal"),
    col.string("reason", 2000),
    col.string("step", 2000),
    Column("log_size", BigInteger, nullable=False, default=0),
    col.epoch("log_mtime"),
    col.integer("version", nullable=False, default=1),
    col.string("hook_state", 16, nullable=False),
    col.string("hook_error", 2000),
    col.epoch("hook_at"),
    Index(None, "status"),
    Index(None, "hook_state"),
    Index(None, "finished_at"),
)

# A session that handed back waiting on a run; the engine decides when it is woken.
proc_parks = Table(
    "proc_parks",
    col.metadata,
    col.serial_id(),
    col.string("session", 200, nullable=False),
    col.string("reason", 2000, nullable=False),
    col.string("until_run", 64, nullable=False),
    col.string("wake_cmd", 4000),
    col.string("state", 16, nullable=False),
    col.epoch("parked_at", nullable=False),
    col.epoch("woken_at"),
    col.string("note", 2000),
    Index(None, "state"),
    Index(None, "session"),
)

# The wake breaker of each session: consecutive wakes without recorded progress.
proc_sessions = Table(
    "proc_sessions",
    col.metadata,
    col.key("session", 200),
    col.integer("wakes_without_progress", nullable=False, default=0),
    col.epoch("progress_at"),
    col.string("progress_note", 2000),
    col.epoch("last_wake_at"),
    col.epoch("updated_at", nullable=False),
)
