"""Tables of the outbox: every message is a delivery row before it is sent."""

from __future__ import annotations

import sqlalchemy as sa

from watchkeeper.store.schema.columns import epoch, metadata

# One row per message to one place. Rows only move forward:
# pending -> sending -> sent | failed | maybe_sent (and sending -> pending for definite non-sends,
# for a claim whose call never started, and for a resend the platform recognises).
deliveries = sa.Table(
    "deliveries",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "incident_id", sa.Integer, sa.ForeignKey("incidents.id", ondelete="CASCADE"), nullable=True
    ),
    # What happened that this message tells: makes enqueueing idempotent.
    sa.Column("dedup_key", sa.String(300), nullable=False, unique=True),
    sa.Column("purpose", sa.String(32), nullable=False),  # card, note, update, diagnosis, runbook
    sa.Column(
        "channel", sa.String(32), nullable=False
    ),  # telegram, discord, slack, webhook, log, demo
    sa.Column("target", sa.JSON, nullable=False),  # chat, thread, and for edits the message id
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    epoch("next_attempt_at", nullable=False),
    epoch("created_at", nullable=False),
    epoch("updated_at", nullable=False),
    sa.Column("claimed_by", sa.String(200), nullable=True),
    # A claim outlives its call by a margin; after it, only a gone claimer's row is recovered.
    epoch("claim_until"),
    sa.Column("platform_message_id", sa.String(200), nullable=True),
    sa.Column("error", sa.String(2000), nullable=True),
    # When the claim's call started; NULL while it has not, so a crash cannot have sent it.
    epoch("call_started_at"),
    # When the first call whose outcome nobody knows started: a platform recognises a resend
    # (Discord's nonce) only for a few minutes after it.
    epoch("unsure_since"),
    sa.Index(None, "status", "next_attempt_at"),
    sa.Index(None, "incident_id"),
)

# Inbound requests from chat platforms, deduplicated by the platform's own id.
inbound = sa.Table(
    "inbound",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("external_id", sa.String(300), nullable=False),
    epoch("received_at", nullable=False),
    sa.UniqueConstraint("platform", "external_id"),
)
