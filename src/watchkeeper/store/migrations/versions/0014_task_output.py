"""task output: the redacted tail of what a queued task printed, kept on the server

A task's command runs on its runner's host, and its output used to stay there.
When the task ends, the runner now sends the last 64 KiB of it, redacted, and
the server keeps it in ``queue_task_output``, one row per task (replaced when
the task runs again), deleted with the task. A table of its own rather than a
column of ``queue_tasks``: every read of tasks would otherwise carry it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    op.create_table(
        "queue_task_output",
        c.string("task_id", 64, nullable=False),
        sa.Column("tail", sa.Text(), nullable=False),
        c.epoch("recorded_at", nullable=False),
        c.cascade("queue_task_output", "task_id", "queue_tasks"),
        c.primary_key("queue_task_output", "task_id"),
    )


def downgrade() -> None:
    op.drop_table("queue_task_output")
