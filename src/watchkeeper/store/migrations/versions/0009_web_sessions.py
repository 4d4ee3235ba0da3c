"""web sessions: dashboard sessions kept on the server, so logging out ends them

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations.columns import (
    cascade,
    create_indexes,
    drop_indexes,
    epoch,
    integer,
    primary_key,
    string,
)

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        string("id_hash", 64, nullable=False),
        integer("token_id", nullable=False),
        string("csrf", 64, nullable=False),
        epoch("created_at", nullable=False),
        epoch("last_seen_at", nullable=False),
        epoch("expires_at", nullable=False),
        epoch("revoked_at"),
        cascade("web_sessions", "token_id", "api_tokens"),
        primary_key("web_sessions", "id_hash"),
    )
    create_indexes("web_sessions", ["token_id"], ["expires_at"])


def downgrade() -> None:
    drop_indexes("web_sessions", ["expires_at"], ["token_id"])
    op.drop_table("web_sessions")
