"""timeline: events with spend, record links, forge deliveries and requests

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations.columns import (
    create_indexes,
    drop_indexes,
    epoch,
    integer,
    json,
    primary_key,
    serial_id,
    string,
)

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _tokens(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), server_default="0", nullable=False)


def upgrade() -> None:
    op.create_table(
        "forge_deliveries",
        string("source", 16, nullable=False),
        string("delivery_id", 200, nullable=False),
        epoch("received_at", nullable=False),
        primary_key("forge_deliveries", "source", "delivery_id"),
    )
    op.create_table(
        "forge_requests",
        string("source", 16, nullable=False),
        string("external_id", 200, nullable=False),
        string("title", 500, nullable=False),
        string("status", 16, nullable=False),
        string("job_id", 64),
        string("reason", 2000),
        json("detail", nullable=False),
        epoch("created_at", nullable=False),
        epoch("updated_at", nullable=False),
        primary_key("forge_requests", "source", "external_id"),
    )
    op.create_table(
        "timeline_events",
        serial_id(),
        string("org", 100),
        string("job_id", 64),
        string("task_id", 64),
        epoch("at", nullable=False),
        string("day", 10, nullable=False),
        epoch("received_at", nullable=False),
        string("phase", 32, nullable=False),
        integer("round"),
        string("fingerprint", 128),
        string("outcome", 32),
        sa.Column("duration_s", sa.Float(), nullable=True),
        string("name", 200),
        string("role", 64),
        string("model", 200),
        string("provider", 100),
        _tokens("input_tokens"),
        _tokens("output_tokens"),
        _tokens("cache_read_tokens"),
        _tokens("cache_write_tokens"),
        epoch("cost"),
        sa.Column("unpriced", sa.Boolean(), server_default=sa.false(), nullable=False),
        string("price_model", 200),
        string("price_provider", 100),
        string("price_version", 64),
        string("rationale", 1000),
        string("detail", 1000),
        string("reporter", 200, nullable=False),
        primary_key("timeline_events", "id"),
    )
    create_indexes("timeline_events", ["at"], ["job_id"], ["task_id"])
    op.create_table(
        "timeline_links",
        serial_id(),
        string("job_id", 64, nullable=False),
        string("kind", 32, nullable=False),
        string("url", 2000, nullable=False),
        string("title", 500),
        string("actor", 200),
        epoch("at", nullable=False),
        json("detail", nullable=False),
        string("signature", 64, nullable=False),
        primary_key("timeline_links", "id"),
    )
    create_indexes("timeline_links", ["job_id"])


def downgrade() -> None:
    drop_indexes("timeline_links", ["job_id"])
    op.drop_table("timeline_links")
    drop_indexes("timeline_events", ["task_id"], ["job_id"], ["at"])
    op.drop_table("timeline_events")
    op.drop_table("forge_requests")
    op.drop_table("forge_deliveries")
