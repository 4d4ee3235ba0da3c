"""outbox: deliveries and inbound dedup"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "inbound",
        c.serial_id(),
        c.string("platform", 32, nullable=False),
        c.string("external_id", 300, nullable=False),
        c.epoch("received_at", nullable=False),
        c.primary_key("inbound", "id"),
        c.unique("inbound", "platform", "external_id"),
    )
    op.create_table(
        "deliveries",
        c.serial_id(),
        c.integer("incident_id"),
        c.string("dedup_key", 300, nullable=False),
        c.string("purpose", 32, nullable=False),
        c.string("channel", 32, nullable=False),
        c.json("target", nullable=False),
        c.json("payload", nullable=False),
        c.string("status", 16, nullable=False),
        c.integer("attempts", nullable=False),
        c.epoch("next_attempt_at", nullable=False),
        c.epoch("created_at", nullable=False),
        c.epoch("updated_at", nullable=False),
        c.string("claimed_by", 200),
        c.string("platform_message_id", 200),
        c.string("error", 2000),
        c.cascade("deliveries", "incident_id", "incidents"),
        c.primary_key("deliveries", "id"),
        c.unique("deliveries", "dedup_key"),
    )
    c.create_indexes("deliveries", ["incident_id"], ["status", "next_attempt_at"])


def downgrade() -> None:
    c.drop_indexes("deliveries", ["status", "next_attempt_at"], ["incident_id"])
    op.drop_table("deliveries")
    op.drop_table("inbound")
