"""Tables of the dashboard: its sessions, kept on the server so they can be ended."""

from __future__ import annotations

from sqlalchemy import Index, Table

from watchkeeper.store import schema_columns as col

# One row per login. The session id itself lives only in the browser's cookie:
# the row keeps its SHA-256, so a copy of the table opens no session.
web_sessions = Table(
    "web_sessions",
    col.metadata,
    col.key("id_hash", 64),
    col.cascade("token_id", "api_tokens"),
    # Rendered into every page the session sees, so kept as it is (useless without the cookie).
    col.string("csrf", 64, nullable=False),
    col.epoch("created_at", nullable=False),
    col.epoch("last_seen_at", nullable=False),
    col.epoch("expires_at", nullable=False),
    col.epoch("revoked_at"),
    Index(None, "token_id"),
    Index(None, "expires_at"),
)
