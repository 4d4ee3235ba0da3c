"""decisions: presses, action journal, runbook switches

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runbook_switches",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_runbook_switches")),
    )
    op.create_table(
        "actions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("via", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.Float(precision=53), nullable=False),
        sa.Column("finished_at", sa.Float(precision=53), nullable=True),
        sa.Column("answer", sa.String(length=2000), nullable=True),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_actions_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_actions")),
    )
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_actions_kind_run_id"), ["kind", "run_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_actions_status"), ["status"], unique=False)

    op.create_table(
        "presses",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(precision=53), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("via", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("state_token", sa.String(length=100), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_presses_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_presses")),
    )
    with op.batch_alter_table("presses", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_presses_incident_id"), ["incident_id"], unique=False)

    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("decided_at", sa.Float(precision=53), nullable=True))
        batch_op.add_column(sa.Column("decided_by", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("decided_via", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("decided_action", sa.String(length=32), nullable=True))
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

    with op.batch_alter_table("presses", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_presses_incident_id"))

    op.drop_table("presses")
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_actions_status"))
        batch_op.drop_index(batch_op.f("ix_actions_kind_run_id"))

    op.drop_table("actions")
    op.drop_table("runbook_switches")
