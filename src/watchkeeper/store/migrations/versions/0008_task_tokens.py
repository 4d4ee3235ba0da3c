"""task tokens: an api token may be bound to one queue task (role ``task``)"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(c.string("task_id", 64))
        batch.add_column(c.string("job_id", 64))
        batch.create_index(batch.f("ix_api_tokens_task_id"), ["task_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_index(batch.f("ix_api_tokens_task_id"))
        batch.drop_column("job_id")
        batch.drop_column("task_id")
