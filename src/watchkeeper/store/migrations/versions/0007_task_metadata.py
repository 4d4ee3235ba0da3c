"""task metadata: free-form marks on a queue task (the interrupted marker)"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    with op.batch_alter_table("queue_tasks") as batch:
        batch.add_column(c.json("metadata"))


def downgrade() -> None:
    with op.batch_alter_table("queue_tasks") as batch:
        batch.drop_column("metadata")
