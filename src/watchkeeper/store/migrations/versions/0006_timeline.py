"""timeline: events with spend, record links, forge deliveries and requests"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0006"
down_revision = "0005"


def _tokens(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), server_default="0", nullable=False)


def upgrade() -> None:
    op.create_table(
        "forge_deliveries",
        c.string("source", 16, nullable=False),
        c.string("delivery_id", 200, nullable=False),
        c.epoch("received_at", nullable=False),
        c.primary_key("forge_deliveries", "source", "delivery_id"),
    )
    op.create_table(
        "forge_requests",
        c.string("source", 16, nullable=False),
        c.string("external_id", 200, nullable=False),
        c.string("title", 500, nullable=False),
        c.string("status", 16, nullable=False),
        c.string("job_id", 64),
        c.string("reason", 2000),
        c.json("detail", nullable=False),
        c.epoch("created_at", nullable=False),
        c.epoch("updated_at", nullable=False),
        c.primary_key("forge_requests", "source", "external_id"),
    )
    op.create_table(
        "timeline_events",
        c.serial_id(),
        c.string("org", 100),
        c.string("job_id", 64),
        c.string("task_id", 64),
        c.epoch("at", nullable=False),
        c.string("day", 10, nullable=False),
        c.epoch("received_at", nullable=False),
        c.string("phase", 32, nullable=False),
        c.integer("round"),
        c.string("fingerprint", 128),
        c.string("outcome", 32),
        sa.Column("duration_s", sa.Float(), nullable=True),
        c.string("name", 200),
        c.string("role", 64),
        c.string("model", 200),
        c.string("provider", 100),
        _tokens("input_tokens"),
        _tokens("output_tokens"),
        _tokens("cache_read_tokens"),
        _tokens("cache_write_tokens"),
        c.epoch("cost"),
        sa.Column("unpriced", sa.Boolean(), server_default=sa.false(), nullable=False),
        c.string("price_model", 200),
        c.string("price_provider", 100),
        c.string("price_version", 64),
        c.string("rationale", 1000),
        c.string("detail", 1000),
        c.string("reporter", 200, nullable=False),
        c.primary_key("timeline_events", "id"),
    )
    c.create_indexes("timeline_events", ["at"], ["job_id"], ["task_id"])
    op.create_table(
        "timeline_links",
        c.serial_id(),
        c.string("job_id", 64, nullable=False),
        c.string("kind", 32, nullable=False),
        c.string("url", 2000, nullable=False),
        c.string("title", 500),
        c.string("actor", 200),
        c.epoch("at", nullable=False),
        c.json("detail", nullable=False),
        c.string("signature", 64, nullable=False),
        c.primary_key("timeline_links", "id"),
    )
    c.create_indexes("timeline_links", ["job_id"])


def downgrade() -> None:
    c.drop_indexes("timeline_links", ["job_id"])
    op.drop_table("timeline_links")
    c.drop_indexes("timeline_events", ["task_id"], ["job_id"], ["at"])
    op.drop_table("timeline_events")
    op.drop_table("forge_requests")
    op.drop_table("forge_deliveries")
