"""Tables of the outbox: every message is a delivery row before it is sent."""

from __future__ import annotations

from sqlalchemy import (
    Index,
    Table,
    UniqueConstraint,
)

from watchkeeper.store import schema_columns as col

# One row per message to one place. Rows only move forward:
# pending -> sending -> sent | failed | maybe_sent (and sending -> pending for definite non-sends).
deliveries = Table(
    "deliveries",
    col.metadata,
    col.serial_id(),
    col.cascade("incident_id", "incidents", nullable=True),
    # What happened that this message tells: makes enqueueing idempotent.
    col.string("dedup_key", 300, nullable=False, unique=True),
    col.string("purpose", 32, nullable=False),  # card, note, update, diagnosis, runbook
    col.string("channel", 32, nullable=False),  # telegram, discord, slack, webhook, log, demo
    col.json("target", nullable=False),  # chat, thread, and for edits the message id
    col.json("payload", nullable=False),
    col.string("status", 16, nullable=False),
    col.integer("attempts", nullable=False, default=0),
    col.epoch("next_attempt_at", nullable=False),
    col.epoch("created_at", nullable=False),
    col.epoch("updated_at", nullable=False),
    col.string("claimed_by", 200),
    col.string("platform_message_id", 200),
    col.string("error", 2000),
    Index(None, "status", "next_attempt_at"),
    Index(None, "incident_id"),
)

# Inbound requests from chat platforms, deduplicated by the platform's own id.
inbound = Table(
    "inbound",
    col.metadata,
    col.serial_id(),
    col.string("platform", 32, nullable=False),
    col.string("external_id", 300, nullable=False),
    col.epoch("received_at", nullable=False),
    UniqueConstraint("platform", "external_id"),
)
