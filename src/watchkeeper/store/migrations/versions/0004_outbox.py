"""outbox: deliveries and inbound dedup

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations.columns import (
    cascade,
    create_indexes,
    drop_indexes,
    epoch,
    integer,
    json,
    primary_key,
    serial_id,
    string,
    unique,
)

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbound",
        serial_id(),
        string("platform", 32, nullable=False),
        string("external_id", 300, nullable=False),
        epoch("received_at", nullable=False),
        primary_key("inbound", "id"),
        unique("inbound", "platform", "external_id"),
    )
    op.create_table(
        "deliveries",
        serial_id(),
        integer("incident_id"),
        string("dedup_key", 300, nullable=False),
        string("purpose", 32, nullable=False),
        string("channel", 32, nullable=False),
        json("target", nullable=False),
        json("payload", nullable=False),
        string("status", 16, nullable=False),
        integer("attempts", nullable=False),
        epoch("next_attempt_at", nullable=False),
        epoch("created_at", nullable=False),
        epoch("updated_at", nullable=False),
        string("claimed_by", 200),
        string("platform_message_id", 200),
        string("error", 2000),
        cascade("deliveries", "incident_id", "incidents"),
        primary_key("deliveries", "id"),
        unique("deliveries", "dedup_key"),
    )
    create_indexes("deliveries", ["incident_id"], ["status", "next_attempt_at"])


def downgrade() -> None:
    drop_indexes("deliveries", ["status", "next_attempt_at"], ["incident_id"])
    op.drop_table("deliveries")
    op.drop_table("inbound")
