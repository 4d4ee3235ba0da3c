"""queue: jobs, tasks, runners, provisions, spend, events"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_table(
        "queue_jobs",
        c.string("id", 64, nullable=False),
        c.string("title", 500, nullable=False),
        c.string("org", 100, nullable=False),
        c.string("fleet", 100, nullable=False),
        c.json("payload", nullable=False),
        c.string("submitted_by", 200, nullable=False),
        c.epoch("created_at", nullable=False),
        c.primary_key("queue_jobs", "id"),
    )
    c.create_indexes("queue_jobs", ["created_at"], ["fleet"], ["org"])
    op.create_table(
        "queue_provisions",
        c.string("org", 100, nullable=False),
        c.string("fleet", 100, nullable=False),
        c.string("state", 16, nullable=False),
        c.string("reason", 2000),
        c.epoch("started_at", nullable=False),
        c.epoch("updated_at", nullable=False),
        c.primary_key("queue_provisions", "org", "fleet"),
    )
    op.create_table(
        "queue_runners",
        c.string("id", 64, nullable=False),
        c.string("name", 200),
        c.string("fleet", 100, nullable=False),
        c.string("org", 100),
        c.integer("capacity", nullable=False),
        c.string("host", 255, nullable=False),
        c.integer("pid", nullable=False),
        c.epoch("registered_at", nullable=False),
        c.epoch("heartbeat_at", nullable=False),
        c.epoch("stopped_at"),
        c.primary_key("queue_runners", "id"),
    )
    c.create_indexes("queue_runners", ["fleet"])
    op.create_table(
        "queue_spend",
        c.string("org", 100, nullable=False),
        c.string("month", 7, nullable=False),
        sa.Column("agent_seconds", sa.Float(), nullable=False),
        c.primary_key("queue_spend", "org", "month"),
    )
    op.create_table(
        "queue_events",
        c.serial_id(),
        c.string("task_id", 64, nullable=False),
        c.string("job_id", 64, nullable=False),
        c.epoch("at", nullable=False),
        c.string("type", 32, nullable=False),
        c.string("detail", 2000),
        c.cascade("queue_events", "job_id", "queue_jobs"),
        c.primary_key("queue_events", "id"),
    )
    c.create_indexes("queue_events", ["job_id"])
    op.create_table(
        "queue_tasks",
        c.string("id", 64, nullable=False),
        c.string("job_id", 64, nullable=False),
        c.integer("seq", nullable=False),
        c.string("org", 100, nullable=False),
        c.string("fleet", 100, nullable=False),
        c.json("payload", nullable=False),
        c.string("status", 16, nullable=False),
        sa.Column("rerunnable", sa.Boolean(), server_default=sa.true(), nullable=False),
        c.integer("attempt", nullable=False),
        c.integer("max_attempts", nullable=False),
        c.integer("version", nullable=False),
        sa.Column("lease_s", sa.Float(), nullable=False),
        c.string("runner_id", 64),
        c.string("lease_token", 64),
        c.epoch("queued_at", nullable=False),
        c.epoch("leased_at"),
        c.epoch("last_renewed_at"),
        c.epoch("progress_at"),
        c.epoch("finished_at"),
        c.epoch("updated_at", nullable=False),
        c.string("step", 2000),
        c.integer("exit_code"),
        c.string("failure_reason", 2000),
        c.string("failure_fingerprint", 200),
        c.cascade("queue_tasks", "job_id", "queue_jobs"),
        c.primary_key("queue_tasks", "id"),
    )
    c.create_indexes(
        "queue_tasks", ["finished_at"], ["job_id"], ["runner_id"], ["status", "fleet", "queued_at"]
    )


def downgrade() -> None:
    c.drop_indexes(
        "queue_tasks", ["status", "fleet", "queued_at"], ["runner_id"], ["job_id"], ["finished_at"]
    )
    op.drop_table("queue_tasks")
    c.drop_indexes("queue_events", ["job_id"])
    op.drop_table("queue_events")
    op.drop_table("queue_spend")
    c.drop_indexes("queue_runners", ["fleet"])
    op.drop_table("queue_runners")
    op.drop_table("queue_provisions")
    c.drop_indexes("queue_jobs", ["org"], ["fleet"], ["created_at"])
    op.drop_table("queue_jobs")
