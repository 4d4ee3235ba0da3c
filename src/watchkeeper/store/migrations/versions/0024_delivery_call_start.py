"""outbox: a delivery records when its call started

* ``deliveries.call_started_at``: when the current claim's call started; NULL
  while it waits for its slot, so a row claimed by a process that died before
  calling is sent again instead of ending "maybe sent".
* ``deliveries.unsure_since``: when the first call of unknown outcome started,
  for a platform that recognises a resend only for a few minutes (Discord).

Rows in flight when the database is upgraded were claimed by a server that did
not record starts: each is taken as started (it may have reached the platform).
"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0024"
down_revision = "0023"


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(c.epoch("call_started_at"))
        batch.add_column(c.epoch("unsure_since"))
    op.execute("UPDATE deliveries SET call_started_at = updated_at WHERE status = 'sending'")


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("unsure_since")
        batch.drop_column("call_started_at")
