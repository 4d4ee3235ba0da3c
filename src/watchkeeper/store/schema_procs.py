"""Tables of the processes watchkeeper starts (``procs/``), on the shared ``metadata``.

A run row is written before its command starts; its owner columns (host, boot
id, pids and their start times) are filled once the shim reports them. Hook
and wake columns are journals: they only move forward, one conditional update
per move.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    false,
)

from watchkeeper.store.schema import epoch_column as _time
from watchkeeper.store.schema import metadata

proc_runs = Table(
    "proc_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("argv", JSON, nullable=False),
    Column("cwd", String(4096), nullable=False),
    Column("host", String(255), nullable=False),
    Column("username", String(100), nullable=False),
    Column("boot_id", String(64), nullable=True),
    Column("status", String(16), nullable=False),
    Column("detach", Boolean, nullable=False, default=False, server_default=false()),
    # The shim owns the run: it is the process whose death without a witness means stale.
    Column("shim_pid", Integer, nullable=True),
    Column("shim_start", String(40), nullable=True),
    # The command itself leads its own process group; abort signals that group.
    Column("pid", Integer, nullable=True),
    Column("pid_start", String(40), nullable=True),
    Column("pgid", Integer, nullable=True),
    Column("budget_s", Float, nullable=True),
    Column("timeout_s", Float, nullable=True),
    Column("origin", JSON, nullable=True),
    Column("session", String(200), nullable=True),
    Column("on_done_cmd", String(4000), nullable=True),
    Column("on_done_url", String(2000), nullable=True),
    _time("created_at", nullable=False),
    _time("started_at"),
    _time("progress_at"),
    _time("finished_at"),
    _time("updated_at", nullable=False),
    _time("abort_requested_at"),
    Column("exit_code", Integer, nullable=True),
    Column("signal", Integer, nullable=True),
    Column("reason", String(2000), nullable=True),
    Column("step", String(2000), nullable=True),
    Column("log_size", BigInteger, nullable=False, default=0),
    _time("log_mtime"),
    Column("version", Integer, nullable=False, default=1),
    Column("hook_state", String(16), nullable=False),
    Column("hook_error", String(2000), nullable=True),
    _time("hook_at"),
    Index(None, "status"),
    Index(None, "hook_state"),
    Index(None, "finished_at"),
)

# A session that handed back waiting on a run; the engine decides when it is woken.
proc_parks = Table(
    "proc_parks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session", String(200), nullable=False),
    Column("reason", String(2000), nullable=False),
    Column("until_run", String(64), nullable=False),
    Column("wake_cmd", String(4000), nullable=True),
    Column("state", String(16), nullable=False),
    _time("parked_at", nullable=False),
    _time("woken_at"),
    Column("note", String(2000), nullable=True),
    Index(None, "state"),
    Index(None, "session"),
)

# The wake breaker of each session: consecutive wakes without recorded progress.
proc_sessions = Table(
    "proc_sessions",
    metadata,
    Column("session", String(200), primary_key=True),
    Column("wakes_without_progress", Integer, nullable=False, default=0),
    _time("progress_at"),
    Column("progress_note", String(2000), nullable=True),
    _time("last_wake_at"),
    _time("updated_at", nullable=False),
)
