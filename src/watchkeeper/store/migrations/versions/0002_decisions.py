"""decisions: presses, action journal, runbook switches"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "runbook_switches",
        c.string("name", 64, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        c.string("updated_by", 200, nullable=False),
        c.epoch("updated_at", nullable=False),
        c.primary_key("runbook_switches", "name"),
    )
    op.create_table(
        "actions",
        c.serial_id(),
        c.integer("incident_id", nullable=False),
        c.string("kind", 63, nullable=False),
        c.string("run_id", 200, nullable=False),
        c.string("action", 32, nullable=False),
        c.string("actor", 200, nullable=False),
        c.string("via", 32, nullable=False),
        c.string("status", 16, nullable=False),
        c.epoch("started_at", nullable=False),
        c.epoch("finished_at"),
        c.string("answer", 2000),
        c.string("host", 200, nullable=False),
        c.integer("pid", nullable=False),
        c.cascade("actions", "incident_id", "incidents"),
        c.primary_key("actions", "id"),
    )
    c.create_indexes("actions", ["kind", "run_id"], ["status"])

    op.create_table(
        "presses",
        c.serial_id(),
        c.integer("incident_id", nullable=False),
        c.epoch("at", nullable=False),
        c.string("actor", 200, nullable=False),
        c.string("via", 32, nullable=False),
        c.string("action", 32, nullable=False),
        c.string("state_token", 100),
        c.string("outcome", 32, nullable=False),
        c.string("detail", 2000),
        c.cascade("presses", "incident_id", "incidents"),
        c.primary_key("presses", "id"),
    )
    c.create_indexes("presses", ["incident_id"])

    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.add_column(c.epoch("decided_at"))
        batch_op.add_column(c.string("decided_by", 200))
        batch_op.add_column(c.string("decided_via", 32))
        batch_op.add_column(c.string("decided_action", 32))
        batch_op.add_column(
            sa.Column("suppressed", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.create_index(batch_op.f("ix_incidents_suppressed"), ["suppressed"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_incidents_suppressed"))
        batch_op.drop_column("suppressed")
        batch_op.drop_column("decided_action")
        batch_op.drop_column("decided_via")
        batch_op.drop_column("decided_by")
        batch_op.drop_column("decided_at")

    c.drop_indexes("presses", ["incident_id"])
    op.drop_table("presses")
    c.drop_indexes("actions", ["status"], ["kind", "run_id"])
    op.drop_table("actions")
    op.drop_table("runbook_switches")
