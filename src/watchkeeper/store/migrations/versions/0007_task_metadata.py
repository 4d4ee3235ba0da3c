"""task metadata: free-form marks on a queue task (the interrupted marker)

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations.columns import json

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("queue_tasks") as batch:
        batch.add_column(json("metadata"))


def downgrade() -> None:
    with op.batch_alter_table("queue_tasks") as batch:
        batch.drop_column("metadata")
