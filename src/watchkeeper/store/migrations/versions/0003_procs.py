"""procs: process runs, parks, session wake breakers

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "proc_parks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.String(length=2000), nullable=False),
        sa.Column("until_run", sa.String(length=64), nullable=False),
        sa.Column("wake_cmd", sa.String(length=4000), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("parked_at", sa.Float(precision=53), nullable=False),
        sa.Column("woken_at", sa.Float(precision=53), nullable=True),
        sa.Column("note", sa.String(length=2000), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_proc_parks")),
    )
    with op.batch_alter_table("proc_parks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_proc_parks_session"), ["session"], unique=False)
        batch_op.create_index(batch_op.f("ix_proc_parks_state"), ["state"], unique=False)

    op.create_table(
        "proc_runs",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("cwd", sa.String(length=4096), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("username", sa.String(length=100), nullable=False),
        sa.Column("boot_id", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("detach", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("shim_pid", sa.Integer(), nullable=True),
        sa.Column("shim_start", sa.String(length=40), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("pid_start", sa.String(length=40), nullable=True),
        sa.Column("pgid", sa.Integer(), nullable=True),
        sa.Column("budget_s", sa.Float(), nullable=True),
        sa.Column("timeout_s", sa.Float(), nullable=True),
        sa.Column("origin", sa.JSON(), nullable=True),
        sa.Column("session", sa.String(length=200), nullable=True),
        sa.Column("on_done_cmd", sa.String(length=4000), nullable=True),
        sa.Column("on_done_url", sa.String(length=2000), nullable=True),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.Column("started_at", sa.Float(precision=53), nullable=True),
        sa.Column("progress_at", sa.Float(precision=53), nullable=True),
        sa.Column("finished_at", sa.Float(precision=53), nullable=True),
        sa.Column("updated_at", sa.Float(precision=53), nullable=False),
        sa.Column("abort_requested_at", sa.Float(precision=53), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("signal", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(length=2000), nullable=True),
        sa.Column("step", sa.String(length=2000), nullable=True),
        sa.Column("log_size", sa.BigInteger(), nullable=False),
        sa.Column("log_mtime", sa.Float(precision=53), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("hook_state", sa.String(length=16), nullable=False),
        sa.Column("hook_error", sa.String(length=2000), nullable=True),
        sa.Column("hook_at", sa.Float(precision=53), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_proc_runs")),
    )
    with op.batch_alter_table("proc_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_proc_runs_finished_at"), ["finished_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_proc_runs_hook_state"), ["hook_state"], unique=False)
        batch_op.create_index(batch_op.f("ix_proc_runs_status"), ["status"], unique=False)

    op.create_table(
        "proc_sessions",
        sa.Column("session", sa.String(length=200), nullable=False),
        sa.Column("wakes_without_progress", sa.Integer(), nullable=False),
        sa.Column("progress_at", sa.Float(precision=53), nullable=True),
        sa.Column("progress_note", sa.String(length=2000), nullable=True),
        sa.Column("last_wake_at", sa.Float(precision=53), nullable=True),
        sa.Column("updated_at", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("session", name=op.f("pk_proc_sessions")),
    )


def downgrade() -> None:
    op.drop_table("proc_sessions")
    with op.batch_alter_table("proc_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_proc_runs_status"))
        batch_op.drop_index(batch_op.f("ix_proc_runs_hook_state"))
        batch_op.drop_index(batch_op.f("ix_proc_runs_finished_at"))

    op.drop_table("proc_runs")
    with op.batch_alter_table("proc_parks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_proc_parks_state"))
        batch_op.drop_index(batch_op.f("ix_proc_parks_session"))

    op.drop_table("proc_parks")
