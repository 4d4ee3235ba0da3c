"""Tables of the processes watchkeeper starts (``procs/``), on the shared ``metadata``.

A run row is written before its command starts; its owner columns (host, boot
id, pids and their start times) are filled once the shim reports them. Its
engine key says which engine settles it: the one on that host with that data
folder. Hook and wake columns are journals: they only move forward, one
conditional update per move.
"""

from __future__ import annotations

import sqlalchemy as sa

from watchkeeper.store.schema.columns import epoch, metadata

proc_runs = sa.Table(
    "proc_runs",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("argv", sa.JSON, nullable=False),
    sa.Column("cwd", sa.String(4096), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    # The engine that settles the run: ``<host>:<data folder>``, where its witness lives.
    # Rows from before data folders were recorded hold the bare host (see migration 0010).
    sa.Column("engine_key", sa.String(4352), nullable=False),
    sa.Column("username", sa.String(100), nullable=False),
    sa.Column("boot_id", sa.String(64), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("detach", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    # The shim owns the run: it is the process whose death without a witness means stale.
    sa.Column("shim_pid", sa.Integer, nullable=True),
    sa.Column("shim_start", sa.String(40), nullable=True),
    # The command itself leads its own process group; abort signals that group.
    sa.Column("pid", sa.Integer, nullable=True),
    sa.Column("pid_start", sa.String(40), nullable=True),
    sa.Column("pgid", sa.Integer, nullable=True),
    # Signs the shim's witness; the command never sees it. Null on runs from before 0012.
    sa.Column("witness_key", sa.String(128), nullable=True),
    sa.Column("budget_s", sa.Float, nullable=True),
    sa.Column("timeout_s", sa.Float, nullable=True),
    sa.Column("origin", sa.JSON, nullable=True),
    sa.Column("session", sa.String(200), nullable=True),
    sa.Column("on_done_cmd", sa.String(4000), nullable=True),
    sa.Column("on_done_url", sa.String(2000), nullable=True),
    epoch("created_at", nullable=False),
    epoch("started_at"),
    epoch("progress_at"),
    epoch("finished_at"),
    epoch("updated_at", nullable=False),
    epoch("abort_requested_at"),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("signal", sa.Integer, nullable=True),
    sa.Column("reason", sa.String(2000), nullable=True),
    sa.Column("step", sa.String(2000), nullable=True),
    sa.Column("log_size", sa.BigInteger, nullable=False, default=0),
    epoch("log_mtime"),
    sa.Column("version", sa.Integer, nullable=False, default=1),
    sa.Column("hook_state", sa.String(16), nullable=False),
    sa.Column("hook_error", sa.String(2000), nullable=True),
    epoch("hook_at"),
    sa.Index(None, "status"),
    sa.Index(None, "hook_state"),
    sa.Index(None, "finished_at"),
)

# A session that handed back waiting on a run; the engine decides when it is woken.
proc_parks = sa.Table(
    "proc_parks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session", sa.String(200), nullable=False),
    sa.Column("reason", sa.String(2000), nullable=False),
    sa.Column("until_run", sa.String(64), nullable=False),
    sa.Column("wake_cmd", sa.String(4000), nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    epoch("parked_at", nullable=False),
    epoch("woken_at"),
    sa.Column("note", sa.String(2000), nullable=True),
    # What the watched run looked like when the engine last looked: progress is a change from it.
    sa.Column("seen_status", sa.String(16), nullable=True),
    sa.Column("seen_log_size", sa.BigInteger, nullable=True),
    sa.Index(None, "state"),
    sa.Index(None, "session"),
)

# The wake breaker of each session: consecutive wakes without recorded progress.
proc_sessions = sa.Table(
    "proc_sessions",
    metadata,
    sa.Column("session", sa.String(200), primary_key=True),
    sa.Column("wakes_without_progress", sa.Integer, nullable=False, default=0),
    epoch("progress_at"),
    sa.Column("progress_note", sa.String(2000), nullable=True),
    epoch("last_wake_at"),
    epoch("updated_at", nullable=False),
)
