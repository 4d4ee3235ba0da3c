"""decisions: presses, action journal, runbook switches

Revision ID: 0002
Revises: 0001
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
    primary_key,
    serial_id,
    string,
)

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runbook_switches",
        string("name", 64, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        string("updated_by", 200, nullable=False),
        epoch("updated_at", nullable=False),
        primary_key("runbook_switches", "name"),
    )
    op.create_table(
        "actions",
        serial_id(),
        integer("incident_id", nullable=False),
        string("kind", 63, nullable=False),
        string("run_id", 200, nullable=False),
        string("action", 32, nullable=False),
        string("actor", 200, nullable=False),
        string("via", 32, nullable=False),
        string("status", 16, nullable=False),
        epoch("started_at", nullable=False),
        epoch("finished_at"),
        string("answer", 2000),
        string("host", 200, nullable=False),
        integer("pid", nullable=False),
        cascade("actions", "incident_id", "incidents"),
        primary_key("actions", "id"),
    )
    create_indexes("actions", ["kind", "run_id"], ["status"])

    op.create_table(
        "presses",
        serial_id(),
        integer("incident_id", nullable=False),
        epoch("at", nullable=False),
        string("actor", 200, nullable=False),
        string("via", 32, nullable=False),
        string("action", 32, nullable=False),
        string("state_token", 100),
        string("outcome", 32, nullable=False),
        string("detail", 2000),
        cascade("presses", "incident_id", "incidents"),
        primary_key("presses", "id"),
    )
    create_indexes("presses", ["incident_id"])

    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.add_column(epoch("decided_at"))
        batch_op.add_column(string("decided_by", 200))
        batch_op.add_column(string("decided_via", 32))
        batch_op.add_column(string("decided_action", 32))
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

    drop_indexes("presses", ["incident_id"])
    op.drop_table("presses")
    drop_indexes("actions", ["status"], ["kind", "run_id"])
    op.drop_table("actions")
    op.drop_table("runbook_switches")
