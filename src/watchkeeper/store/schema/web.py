"""Tables of the dashboard: its sessions, kept on the server so they can be ended."""

from __future__ import annotations

import sqlalchemy as sa

from watchkeeper.store.schema.columns import epoch, metadata

# One row per login. The session id itself lives only in the browser's cookie:
# the row keeps its SHA-256, so a copy of the table opens no session.
web_sessions = sa.Table(
    "web_sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column(
        "token_id", sa.Integer, sa.ForeignKey("api_tokens.id", ondelete="CASCADE"), nullable=False
    ),
    # Rendered into every page the session sees, so kept as it is (useless without the cookie).
    sa.Column("csrf", sa.String(64), nullable=False),
    epoch("created_at", nullable=False),
    epoch("last_seen_at", nullable=False),
    epoch("expires_at", nullable=False),
    epoch("revoked_at"),
    sa.Index(None, "token_id"),
    sa.Index(None, "expires_at"),
)
