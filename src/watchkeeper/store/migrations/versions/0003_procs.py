"""procs: process runs, parks, session wake breakers"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "proc_parks",
        c.serial_id(),
        c.string("session", 200, nullable=False),
        c.string("reason", 2000, nullable=False),
        c.string("until_run", 64, nullable=False),
        c.string("wake_cmd", 4000),
        c.string("state", 16, nullable=False),
        c.epoch("parked_at", nullable=False),
        c.epoch("woken_at"),
        c.string("note", 2000),
        c.primary_key("proc_parks", "id"),
    )
    c.create_indexes("proc_parks", ["session"], ["state"])

    op.create_table(
        "proc_runs",
        c.string("run_id", 64, nullable=False),
        c.string("name", 200, nullable=False),
        c.json("argv", nullable=False),
        c.string("cwd", 4096, nullable=False),
        c.string("host", 255, nullable=False),
        c.string("username", 100, nullable=False),
        c.string("boot_id", 64),
        c.string("status", 16, nullable=False),
        sa.Column("detach", sa.Boolean(), server_default=sa.false(), nullable=False),
        c.integer("shim_pid"),
        c.string("shim_start", 40),
        c.integer("pid"),
        c.string("pid_start", 40),
        c.integer("pgid"),
        sa.Column("budget_s", sa.Float(), nullable=True),
        sa.Column("timeout_s", sa.Float(), nullable=True),
        c.json("origin"),
        c.string("session", 200),
        c.string("on_done_cmd", 4000),
        c.string("on_done_url", 2000),
        c.epoch("created_at", nullable=False),
        c.epoch("started_at"),
        c.epoch("progress_at"),
        c.epoch("finished_at"),
        c.epoch("updated_at", nullable=False),
        c.epoch("abort_requested_at"),
        c.integer("exit_code"),
        c.integer("signal"),
        c.string("reason", 2000),
        c.string("step", 2000),
        sa.Column("log_size", sa.BigInteger(), nullable=False),
        c.epoch("log_mtime"),
        c.integer("version", nullable=False),
        c.string("hook_state", 16, nullable=False),
        c.string("hook_error", 2000),
        c.epoch("hook_at"),
        c.primary_key("proc_runs", "run_id"),
    )
    c.create_indexes("proc_runs", ["finished_at"], ["hook_state"], ["status"])

    op.create_table(
        "proc_sessions",
        c.string("session", 200, nullable=False),
        c.integer("wakes_without_progress", nullable=False),
        c.epoch("progress_at"),
        c.string("progress_note", 2000),
        c.epoch("last_wake_at"),
        c.epoch("updated_at", nullable=False),
        c.primary_key("proc_sessions", "session"),
    )


def downgrade() -> None:
    op.drop_table("proc_sessions")
    c.drop_indexes("proc_runs", ["status"], ["hook_state"], ["finished_at"])
    op.drop_table("proc_runs")
    c.drop_indexes("proc_parks", ["state"], ["session"])
    op.drop_table("proc_parks")
