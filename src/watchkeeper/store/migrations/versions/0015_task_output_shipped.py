"""task output shipped: all of a queued task's output, shipped while it runs

The runner used to send only the redacted tail of a task's output, when the
task ended. It now also ships all of it, redacted, piece by piece while the
task runs. ``queue_task_shipped`` holds one row per task for the run being
kept (its lease token, where the next piece starts in the run's log, how much
is kept, whether it was cut at the cap, whether the runner sent it all);
``queue_task_shipped_pieces`` holds the pieces, keyed by the log offset each
starts at, so a piece sent twice is kept once. Both go with their task. The
tail in ``queue_task_output`` stays as it was.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    op.create_table(
        "queue_task_shipped",
        c.string("task_id", 64, nullable=False),
        c.string("lease_token", 64, nullable=False),
        c.string("run_id", 64),
        c.string("host", 255),
        sa.Column("next_offset", sa.BigInteger(), nullable=False),
        sa.Column("kept_bytes", sa.BigInteger(), nullable=False),
        sa.Column("cut", sa.Boolean(), nullable=False),
        sa.Column("complete", sa.Boolean(), nullable=False),
        c.epoch("updated_at", nullable=False),
        c.cascade("queue_task_shipped", "task_id", "queue_tasks"),
        c.primary_key("queue_task_shipped", "task_id"),
    )
    op.create_table(
        "queue_task_shipped_pieces",
        c.string("task_id", 64, nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        c.cascade("queue_task_shipped_pieces", "task_id", "queue_tasks"),
        c.primary_key("queue_task_shipped_pieces", "task_id", "offset"),
    )


def downgrade() -> None:
    op.drop_table("queue_task_shipped_pieces")
    op.drop_table("queue_task_shipped")
