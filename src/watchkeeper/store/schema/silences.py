"""Tables of silences and acknowledgements: who muted which work, and who is looking."""

from __future__ import annotations

import sqlalchemy as sa

from watchkeeper.store.schema.columns import epoch, metadata

# One row per silence. Expiring one early moves its end to that moment; rows are kept,
# so a silence's history (and its one expiry announcement) outlives it.
silences = sa.Table(
    "silences",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    # Matchers: each one given must match; at least one is given.
    sa.Column("kind", sa.String(63), nullable=True),
    sa.Column("run_id", sa.String(200), nullable=True),
    sa.Column("title_pattern", sa.String(500), nullable=True),
    sa.Column("title_syntax", sa.String(8), nullable=True),  # glob or regex
    sa.Column("origin", sa.String(300), nullable=True),  # platform:chat or platform:chat/thread
    sa.Column("comment", sa.String(2000), nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_via", sa.String(32), nullable=False),
    epoch("created_at", nullable=False),
    epoch("starts_at", nullable=False),
    epoch("ends_at", nullable=False),
    sa.Column("expired_by", sa.String(200), nullable=True),
    # Set in the transaction that queues the expiry announcement: it is queued once.
    epoch("announced_at"),
    sa.Index(None, "ends_at"),
)

# The incidents whose messages a silence held back: what its expiry announcement names.
silenced_incidents = sa.Table(
    "silenced_incidents",
    metadata,
    sa.Column(
        "silence_id",
        sa.Integer,
        sa.ForeignKey("silences.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column(
        "incident_id",
        sa.Integer,
        sa.ForeignKey("incidents.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    epoch("at", nullable=False),
    sa.Index(None, "incident_id"),
)

# Who said "I am on it", for one episode of an incident; a later episode needs a new one.
incident_acks = sa.Table(
    "incident_acks",
    metadata,
    sa.Column(
        "incident_id",
        sa.Integer,
        sa.ForeignKey("incidents.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("episode", sa.Integer, nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("via", sa.String(32), nullable=False),
    epoch("at", nullable=False),
)
