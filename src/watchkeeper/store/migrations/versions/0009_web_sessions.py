"""web sessions: dashboard sessions kept on the server, so logging out ends them"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        c.string("id_hash", 64, nullable=False),
        c.integer("token_id", nullable=False),
        c.string("csrf", 64, nullable=False),
        c.epoch("created_at", nullable=False),
        c.epoch("last_seen_at", nullable=False),
        c.epoch("expires_at", nullable=False),
        c.epoch("revoked_at"),
        c.cascade("web_sessions", "token_id", "api_tokens"),
        c.primary_key("web_sessions", "id_hash"),
    )
    c.create_indexes("web_sessions", ["token_id"], ["expires_at"])


def downgrade() -> None:
    c.drop_indexes("web_sessions", ["expires_at"], ["token_id"])
    op.drop_table("web_sessions")
