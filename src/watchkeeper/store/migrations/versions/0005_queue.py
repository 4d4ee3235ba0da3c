"""queue: jobs, tasks, runners, provisions, spend, events

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations.columns import (
    cascade,
    create_indexes,
    drop_indexes,
    epoch,
    integer,
    json,
    primary_key,
    serial_id,
    string,
)

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queue_jobs",
        string("id", 64, nullable=False),
        string("title", 500, nullable=False),
        string("org", 100, nullable=False),
        string("fleet", 100, nullable=False),
        json("payload", nullable=False),
        string("submitted_by", 200, nullable=False),
        epoch("created_at", nullable=False),
        primary_key("queue_jobs", "id"),
    )
    create_indexes("queue_jobs", ["created_at"], ["fleet"], ["org"])
    op.create_table(
        "queue_provisions",
        string("org", 100, nullable=False),
        string("fleet", 100, nullable=False),
        string("state", 16, nullable=False),
        string("reason", 2000),
        epoch("started_at", nullable=False),
        epoch("updated_at", nullable=False),
        primary_key("queue_provisions", "org", "fleet"),
    )
    op.create_table(
        "queue_runners",
        string("id", 64, nullable=False),
        string("name", 200),
        string("fleet", 100, nullable=False),
        string("org", 100),
        integer("capacity", nullable=False),
        string("host", 255, nullable=False),
        integer("pid", nullable=False),
        epoch("registered_at", nullable=False),
        epoch("heartbeat_at", nullable=False),
        epoch("stopped_at"),
        primary_key("queue_runners", "id"),
    )
    create_indexes("queue_runners", ["fleet"])
    op.create_table(
        "queue_spend",
        string("org", 100, nullable=False),
        string("month", 7, nullable=False),
        sa.Column("agent_seconds", sa.Float(), nullable=False),
        primary_key("queue_spend", "org", "month"),
    )
    op.create_table(
        "queue_events",
        serial_id(),
        string("task_id", 64, nullable=False),
        string("job_id", 64, nullable=False),
        epoch("at", nullable=False),
        string("type", 32, nullable=False),
        string("detail", 2000),
        cascade("queue_events", "job_id", "queue_jobs"),
        primary_key("queue_events", "id"),
    )
    create_indexes("queue_events", ["job_id"])
    op.create_table(
        "queue_tasks",
        string("id", 64, nullable=False),
        string("job_id", 64, nullable=False),
        integer("seq", nullable=False),
        string("org", 100, nullable=False),
        string("fleet", 100, nullable=False),
        json("payload", nullable=False),
        string("status", 16, nullable=False),
        sa.Column("rerunnable", sa.Boolean(), server_default=sa.true(), nullable=False),
        integer("attempt", nullable=False),
        integer("max_attempts", nullable=False),
        integer("version", nullable=False),
        sa.Column("lease_s", sa.Float(), nullable=False),
        string("runner_id", 64),
        string("lease_token", 64),
        epoch("queued_at", nullable=False),
        epoch("leased_at"),
        epoch("last_renewed_at"),
        epoch("progress_at"),
        epoch("finished_at"),
        epoch("updated_at", nullable=False),
        string("step", 2000),
        integer("exit_code"),
        string("failure_reason", 2000),
        string("failure_fingerprint", 200),
        cascade("queue_tasks", "job_id", "queue_jobs"),
        primary_key("queue_tasks", "id"),
    )
    create_indexes(
        "queue_tasks", ["finished_at"], ["job_id"], ["runner_id"], ["status", "fleet", "queued_at"]
    )


def downgrade() -> None:
    drop_indexes(
        "queue_tasks", ["status", "fleet", "queued_at"], ["runner_id"], ["job_id"], ["finished_at"]
    )
    op.drop_table("queue_tasks")
    drop_indexes("queue_events", ["job_id"])
    op.drop_table("queue_events")
    op.drop_table("queue_spend")
    drop_indexes("queue_runners", ["fleet"])
    op.drop_table("queue_runners")
    op.drop_table("queue_provisions")
    drop_indexes("queue_jobs", ["org"], ["fleet"], ["created_at"])
    op.drop_table("queue_jobs")
