"""Tables of the dashboard: its sessions, kept on the server so they can be ended."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, String, Table

from watchkeeper.store.schema import epoch_column as _time
from watchkeeper.store.schema import metadata

# One row per login. The session id itself lives only in the browser's cookie:
# the row keeps its SHA-256, so a copy of the table opens no session.
web_sessions = Table(
    "web_sessions",
    metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("token_id", Integer, ForeignKey("api_tokens.id", ondelete="CASCADE"), nullable=False),
    # Rendered into every page the session sees, so kept as it is (useless without the cookie).
    Column("csrf", String(64), nullable=False),
    _time("created_at", nullable=False),
    _time("last_seen_at", nullable=False),
    _time("expires_at", nullable=False),
    _time("revoked_at"),
    Index(None, "token_id"),
    Index(None, "expires_at"),
)
