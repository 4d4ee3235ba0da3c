"""web sessions: dashboard sessions kept on the server, so logging out ends them

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.Column("last_seen_at", sa.Float(precision=53), nullable=False),
        sa.Column("expires_at", sa.Float(precision=53), nullable=False),
        sa.Column("revoked_at", sa.Float(precision=53), nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_tokens.id"],
            name=op.f("fk_web_sessions_token_id_api_tokens"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_web_sessions")),
    )
    with op.batch_alter_table("web_sessions") as batch:
        batch.create_index(batch.f("ix_web_sessions_token_id"), ["token_id"], unique=False)
        batch.create_index(batch.f("ix_web_sessions_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("web_sessions") as batch:
        batch.drop_index(batch.f("ix_web_sessions_expires_at"))
        batch.drop_index(batch.f("ix_web_sessions_token_id"))
    op.drop_table("web_sessions")
