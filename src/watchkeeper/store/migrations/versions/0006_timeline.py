"""timeline: events with spend, record links, forge deliveries and requests

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _tokens(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), server_default="0", nullable=False)


def upgrade() -> None:
    op.create_table(
        "forge_deliveries",
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("delivery_id", sa.String(length=200), nullable=False),
        sa.Column("received_at", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("source", "delivery_id", name=op.f("pk_forge_deliveries")),
    )
    op.create_table(
        "forge_requests",
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("external_id", sa.String(length=200), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=True),
        sa.Column("reason", sa.String(length=2000), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.Column("updated_at", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("source", "external_id", name=op.f("pk_forge_requests")),
    )
    op.create_table(
        "timeline_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("org", sa.String(length=100), nullable=True),
        sa.Column("job_id", sa.String(length=64), nullable=True),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column("at", sa.Float(precision=53), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("received_at", sa.Float(precision=53), nullable=False),
        sa.Column("phase", sa.String(length=32), nullable=False),
        sa.Column("round", sa.Integer(), nullable=True),
        sa.Column("fingerprint", sa.String(length=128), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("role", sa.String(length=64), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("provider", sa.String(length=100), nullable=True),
        _tokens("input_tokens"),
        _tokens("output_tokens"),
        _tokens("cache_read_tokens"),
        _tokens("cache_write_tokens"),
        sa.Column("cost", sa.Float(precision=53), nullable=True),
        sa.Column("unpriced", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("price_model", sa.String(length=200), nullable=True),
        sa.Column("price_provider", sa.String(length=100), nullable=True),
        sa.Column("price_version", sa.String(length=64), nullable=True),
        sa.Column("rationale", sa.String(length=1000), nullable=True),
        sa.Column("detail", sa.String(length=1000), nullable=True),
        sa.Column("reporter", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_timeline_events")),
    )
    op.create_index(op.f("ix_timeline_events_at"), "timeline_events", ["at"], unique=False)
    op.create_index(op.f("ix_timeline_events_job_id"), "timeline_events", ["job_id"], unique=False)
    op.create_index(
        op.f("ix_timeline_events_task_id"), "timeline_events", ["task_id"], unique=False
    )
    op.create_table(
        "timeline_links",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=True),
        sa.Column("at", sa.Float(precision=53), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("signature", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_timeline_links")),
    )
    op.create_index(op.f("ix_timeline_links_job_id"), "timeline_links", ["job_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_timeline_links_job_id"), table_name="timeline_links")
    op.drop_table("timeline_links")
    op.drop_index(op.f("ix_timeline_events_task_id"), table_name="timeline_events")
    op.drop_index(op.f("ix_timeline_events_job_id"), table_name="timeline_events")
    op.drop_index(op.f("ix_timeline_events_at"), table_name="timeline_events")
    op.drop_table("timeline_events")
    op.drop_table("forge_requests")
    op.drop_table("forge_deliveries")
