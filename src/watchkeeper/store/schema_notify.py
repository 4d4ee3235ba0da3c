"""Tables of the outbox: every message is a delivery row before it is sent."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    UniqueConstraint,
)

from watchkeeper.store.schema import epoch_column as _time
from watchkeeper.store.schema import metadata

# One row per message to one place. Rows only move forward:
# pending -> sending -> sent | failed | maybe_sent (and sending -> pending for definite non-sends).
deliveries = Table(
    "deliveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("incident_id", Integer, ForeignKey("incidents.id", ondelete="CASCADE"), nullable=True),
    # What happened that this message tells: makes enqueueing idempotent.
    Column("dedup_key", String(300), nullable=False, unique=True),
    Column("purpose", String(32), nullable=False),  # card, note, update, diagnosis, runbook
    Column("channel", String(32), nullable=False),  # telegram, discord, slack, webhook, log, demo
    Column("target", JSON, nullable=False),  # chat, thread, and for edits the message id
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    _time("next_attempt_at", nullable=False),
    _time("created_at", nullable=False),
    _time("updated_at", nullable=False),
    Column("claimed_by", String(200), nullable=True),
    Column("platform_message_id", String(200), nullable=True),
    Column("error", String(2000), nullable=True),
    Index(None, "status", "next_attempt_at"),
    Index(None, "incident_id"),
)

# Inbound requests from chat platforms, deduplicated by the platform's own id.
inbound = Table(
    "inbound",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("platform", String(32), nullable=False),
    Column("external_id", String(300), nullable=False),
    _time("received_at", nullable=False),
    UniqueConstraint("platform", "external_id"),
)
