"""core tables: push runs, incidents, tokens, sweep heartbeats

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.Column("revoked_at", sa.Float(precision=53), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("condition", sa.String(length=16), nullable=False),
        sa.Column("fingerprint", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("reason", sa.String(length=2000), nullable=False),
        sa.Column("since", sa.Float(precision=53), nullable=False),
        sa.Column("opened_at", sa.Float(precision=53), nullable=False),
        sa.Column("updated_at", sa.Float(precision=53), nullable=False),
        sa.Column("resolved_at", sa.Float(precision=53), nullable=True),
        sa.Column("resolution", sa.String(length=500), nullable=True),
        sa.Column("state_token", sa.String(length=100), nullable=False),
        sa.Column("origin", sa.JSON(), nullable=True),
        sa.Column("effects", sa.String(length=16), nullable=False),
        sa.Column("episodes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
        sa.UniqueConstraint(
            "kind",
            "run_id",
            "condition",
            "fingerprint",
            name=op.f("uq_incidents_kind_run_id_condition_fingerprint"),
        ),
    )
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_incidents_status"), ["status"], unique=False)

    op.create_table(
        "push_runs",
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("origin", sa.JSON(), nullable=True),
        sa.Column("effects", sa.String(length=16), nullable=False),
        sa.Column("budget_s", sa.Float(), nullable=True),
        sa.Column("expected_s", sa.Float(), nullable=True),
        sa.Column("lease_s", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(precision=53), nullable=False),
        sa.Column("progress_at", sa.Float(precision=53), nullable=False),
        sa.Column("seen_at", sa.Float(precision=53), nullable=False),
        sa.Column("finished_at", sa.Float(precision=53), nullable=True),
        sa.Column("updated_at", sa.Float(precision=53), nullable=False),
        sa.Column("step", sa.String(length=2000), nullable=True),
        sa.Column("failure_reason", sa.String(length=2000), nullable=True),
        sa.Column("failure_fingerprint", sa.String(length=200), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_push_runs")),
    )
    with op.batch_alter_table("push_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_push_runs_finished_at"), ["finished_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_push_runs_kind_status"), ["kind", "status"], unique=False
        )

    op.create_table(
        "watch_heartbeats",
        sa.Column("replica", sa.String(length=200), nullable=False),
        sa.Column("last_sweep_at", sa.Float(precision=53), nullable=False),
        sa.Column("last_ok_at", sa.Float(precision=53), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("error", sa.String(length=2000), nullable=True),
        sa.PrimaryKeyConstraint("replica", name=op.f("pk_watch_heartbeats")),
    )
    op.create_table(
        "incident_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(precision=53), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_incident_events_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incident_events")),
    )
    with op.batch_alter_table("incident_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_incident_events_incident_id"), ["incident_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("incident_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_incident_events_incident_id"))

    op.drop_table("incident_events")
    op.drop_table("watch_heartbeats")
    with op.batch_alter_table("push_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_push_runs_kind_status"))
        batch_op.drop_index(batch_op.f("ix_push_runs_finished_at"))

    op.drop_table("push_runs")
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_incidents_status"))

    op.drop_table("incidents")
    op.drop_table("api_tokens")
