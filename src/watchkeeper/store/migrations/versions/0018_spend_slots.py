"""queue_spend: an org's month spread over slots, so its completions never queue on one row

Every completion added its agent time to the single row of its org and
month, so completions of one org running at once waited on each other's row
lock. The new ``slot`` column joins the primary key; existing totals become
slot 0, and readers sum an org's slots. Going down folds the slots back into
one row per org and month.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    with op.batch_alter_table("queue_spend") as batch:
        batch.add_column(sa.Column("slot", sa.Integer(), server_default="0", nullable=False))
        batch.drop_constraint(op.f("pk_queue_spend"), type_="primary")
        batch.create_primary_key(op.f("pk_queue_spend"), ["org", "month", "slot"])


def downgrade() -> None:
    op.create_table(
        "queue_spend_folded",
        c.string("org", 100, nullable=False),
        c.string("month", 7, nullable=False),
        sa.Column("agent_seconds", sa.Float(), nullable=False),
    )
    op.execute(
        "INSERT INTO queue_spend_folded (org, month, agent_seconds) "
        "SELECT org, month, SUM(agent_seconds) FROM queue_spend GROUP BY org, month"
    )
    op.execute("DELETE FROM queue_spend")
    with op.batch_alter_table("queue_spend") as batch:
        batch.drop_constraint(op.f("pk_queue_spend"), type_="primary")
        batch.drop_column("slot")
        batch.create_primary_key(op.f("pk_queue_spend"), ["org", "month"])
    op.execute(
        "INSERT INTO queue_spend (org, month, agent_seconds) "
        "SELECT org, month, agent_seconds FROM queue_spend_folded"
    )
    op.drop_table("queue_spend_folded")
