"""queue: jobs, tasks, runners, provisions, spend, events

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queue_jobs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("org", sa.String(length=100), nullable=False),
        sa.Column("fleet", sa.String(length=100), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("submitted_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_jobs")),
    )
    op.create_index(op.f("ix_queue_jobs_created_at"), "queue_jobs", ["created_at"], unique=False)
    op.create_index(op.f("ix_queue_jobs_fleet"), "queue_jobs", ["fleet"], unique=False)
    op.create_index(op.f("ix_queue_jobs_org"), "queue_jobs", ["org"], unique=False)
    op.create_table(
        "queue_provisions",
        sa.Column("org", sa.String(length=100), nullable=False),
        sa.Column("fleet", sa.String(length=100), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=2000), nullable=True),
        sa.Column("started_at", sa.Float(precision=53), nullable=False),
        sa.Column("updated_at", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("org", "fleet", name=op.f("pk_queue_provisions")),
    )
    op.create_table(
        "queue_runners",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("fleet", sa.String(length=100), nullable=False),
        sa.Column("org", sa.String(length=100), nullable=True),
        sa.Column("capacity", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("registered_at", sa.Float(precision=53), nullable=False),
        sa.Column("heartbeat_at", sa.Float(precision=53), nullable=False),
        sa.Column("stopped_at", sa.Float(precision=53), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_runners")),
    )
    op.create_index(op.f("ix_queue_runners_fleet"), "queue_runners", ["fleet"], unique=False)
    op.create_table(
        "queue_spend",
        sa.Column("org", sa.String(length=100), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("agent_seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("org", "month", name=op.f("pk_queue_spend")),
    )
    op.create_table(
        "queue_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("at", sa.Float(precision=53), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["queue_jobs.id"],
            name=op.f("fk_queue_events_job_id_queue_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_events")),
    )
    op.create_index(op.f("ix_queue_events_job_id"), "queue_events", ["job_id"], unique=False)
    op.create_table(
        "queue_tasks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("org", sa.String(length=100), nullable=False),
        sa.Column("fleet", sa.String(length=100), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("rerunnable", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("lease_s", sa.Float(), nullable=False),
        sa.Column("runner_id", sa.String(length=64), nullable=True),
        sa.Column("lease_token", sa.String(length=64), nullable=True),
        sa.Column("queued_at", sa.Float(precision=53), nullable=False),
        sa.Column("leased_at", sa.Float(precision=53), nullable=True),
        sa.Column("last_renewed_at", sa.Float(precision=53), nullable=True),
        sa.Column("progress_at", sa.Float(precision=53), nullable=True),
        sa.Column("finished_at", sa.Float(precision=53), nullable=True),
        sa.Column("updated_at", sa.Float(precision=53), nullable=False),
        sa.Column("step", sa.String(length=2000), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("failure_reason", sa.String(length=2000), nullable=True),
        sa.Column("failure_fingerprint", sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["queue_jobs.id"],
            name=op.f("fk_queue_tasks_job_id_queue_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_tasks")),
    )
    op.create_index(
        op.f("ix_queue_tasks_finished_at"), "queue_tasks", ["finished_at"], unique=False
    )
    op.create_index(op.f("ix_queue_tasks_job_id"), "queue_tasks", ["job_id"], unique=False)
    op.create_index(op.f("ix_queue_tasks_runner_id"), "queue_tasks", ["runner_id"], unique=False)
    op.create_index(
        op.f("ix_queue_tasks_status_fleet_queued_at"),
        "queue_tasks",
        ["status", "fleet", "queued_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_queue_tasks_status_fleet_queued_at"), table_name="queue_tasks")
    op.drop_index(op.f("ix_queue_tasks_runner_id"), table_name="queue_tasks")
    op.drop_index(op.f("ix_queue_tasks_job_id"), table_name="queue_tasks")
    op.drop_index(op.f("ix_queue_tasks_finished_at"), table_name="queue_tasks")
    op.drop_table("queue_tasks")
    op.drop_index(op.f("ix_queue_events_job_id"), table_name="queue_events")
    op.drop_table("queue_events")
    op.drop_table("queue_spend")
    op.drop_index(op.f("ix_queue_runners_fleet"), table_name="queue_runners")
    op.drop_table("queue_runners")
    op.drop_table("queue_provisions")
    op.drop_index(op.f("ix_queue_jobs_org"), table_name="queue_jobs")
    op.drop_index(op.f("ix_queue_jobs_fleet"), table_name="queue_jobs")
    op.drop_index(op.f("ix_queue_jobs_created_at"), table_name="queue_jobs")
    op.drop_table("queue_jobs")
