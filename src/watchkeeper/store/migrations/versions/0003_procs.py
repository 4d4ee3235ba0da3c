"""procs: process runs, parks, session wake breakers

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations.columns import (
    create_indexes,
    drop_indexes,
    epoch,
    integer,
    json,
    primary_key,
    serial_id,
    string,
)

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "proc_parks",
        serial_id(),
        string("session", 200, nullable=False),
        string("reason", 2000, nullable=False),
        string("until_run", 64, nullable=False),
        string("wake_cmd", 4000),
        string("state", 16, nullable=False),
        epoch("parked_at", nullable=False),
        epoch("woken_at"),
        string("note", 2000),
        primary_key("proc_parks", "id"),
    )
    create_indexes("proc_parks", ["session"], ["state"])

    op.create_table(
        "proc_runs",
        string("run_id", 64, nullable=False),
        string("name", 200, nullable=False),
        json("argv", nullable=False),
        string("cwd", 4096, nullable=False),
        string("host", 255, nullable=False),
        string("username", 100, nullable=False),
        string("boot_id", 64),
        string("status", 16, nullable=False),
        sa.Column("detach", sa.Boolean(), server_default=sa.false(), nullable=False),
        integer("shim_pid"),
        string("shim_start", 40),
        integer("pid"),
        string("pid_start", 40),
        integer("pgid"),
        sa.Column("budget_s", sa.Float(), nullable=True),
        sa.Column("timeout_s", sa.Float(), nullable=True),
        json("origin"),
        string("session", 200),
        string("on_done_cmd", 4000),
        string("on_done_url", 2000),
        epoch("created_at", nullable=False),
        epoch("started_at"),
        epoch("progress_at"),
        epoch("finished_at"),
        epoch("updated_at", nullable=False),
        epoch("abort_requested_at"),
        integer("exit_code"),
        integer("signal"),
        string("reason", 2000),
        string("step", 2000),
        sa.Column("log_size", sa.BigInteger(), nullable=False),
        epoch("log_mtime"),
        integer("version", nullable=False),
        string("hook_state", 16, nullable=False),
        string("hook_error", 2000),
        epoch("hook_at"),
        primary_key("proc_runs", "run_id"),
    )
    create_indexes("proc_runs", ["finished_at"], ["hook_state"], ["status"])

    op.create_table(
        "proc_sessions",
        string("session", 200, nullable=False),
        integer("wakes_without_progress", nullable=False),
        epoch("progress_at"),
        string("progress_note", 2000),
        epoch("last_wake_at"),
        epoch("updated_at", nullable=False),
        primary_key("proc_sessions", "session"),
    )


def downgrade() -> None:
    op.drop_table("proc_sessions")
    drop_indexes("proc_runs", ["status"], ["hook_state"], ["finished_at"])
    op.drop_table("proc_runs")
    drop_indexes("proc_parks", ["state"], ["session"])
    op.drop_table("proc_parks")
