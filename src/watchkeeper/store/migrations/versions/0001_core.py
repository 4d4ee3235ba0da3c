"""core tables: push runs, incidents, tokens, sweep heartbeats

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations.columns import (
    cascade,
    create_indexes,
    drop_indexes,
    epoch,
    integer,
    json,
    primary_key,
    serial_id,
    string,
    unique,
)

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        serial_id(),
        string("name", 100, nullable=False),
        string("role", 16, nullable=False),
        string("token_hash", 64, nullable=False),
        epoch("created_at", nullable=False),
        epoch("revoked_at"),
        primary_key("api_tokens", "id"),
        unique("api_tokens", "token_hash"),
    )
    op.create_table(
        "incidents",
        serial_id(),
        string("kind", 63, nullable=False),
        string("run_id", 200, nullable=False),
        string("condition", 16, nullable=False),
        string("fingerprint", 200, nullable=False),
        string("status", 16, nullable=False),
        string("title", 500, nullable=False),
        string("reason", 2000, nullable=False),
        epoch("since", nullable=False),
        epoch("opened_at", nullable=False),
        epoch("updated_at", nullable=False),
        epoch("resolved_at"),
        string("resolution", 500),
        string("state_token", 100, nullable=False),
        json("origin"),
        string("effects", 16, nullable=False),
        integer("episodes", nullable=False),
        primary_key("incidents", "id"),
        unique("incidents", "kind", "run_id", "condition", "fingerprint"),
    )
    create_indexes("incidents", ["status"])

    op.create_table(
        "push_runs",
        string("run_id", 200, nullable=False),
        string("kind", 63, nullable=False),
        string("title", 500, nullable=False),
        string("status", 16, nullable=False),
        integer("attempt", nullable=False),
        integer("version", nullable=False),
        json("origin"),
        string("effects", 16, nullable=False),
        sa.Column("budget_s", sa.Float(), nullable=True),
        sa.Column("expected_s", sa.Float(), nullable=True),
        sa.Column("lease_s", sa.Float(), nullable=False),
        epoch("started_at", nullable=False),
        epoch("progress_at", nullable=False),
        epoch("seen_at", nullable=False),
        epoch("finished_at"),
        epoch("updated_at", nullable=False),
        string("step", 2000),
        string("failure_reason", 2000),
        string("failure_fingerprint", 200),
        sa.Column("detail", sa.Text(), nullable=True),
        primary_key("push_runs", "run_id"),
    )
    create_indexes("push_runs", ["finished_at"], ["kind", "status"])

    op.create_table(
        "watch_heartbeats",
        string("replica", 200, nullable=False),
        epoch("last_sweep_at", nullable=False),
        epoch("last_ok_at"),
        sa.Column("duration_s", sa.Float(), nullable=False),
        integer("runs", nullable=False),
        string("error", 2000),
        primary_key("watch_heartbeats", "replica"),
    )
    op.create_table(
        "incident_events",
        serial_id(),
        integer("incident_id", nullable=False),
        epoch("at", nullable=False),
        string("type", 32, nullable=False),
        string("detail", 2000),
        cascade("incident_events", "incident_id", "incidents"),
        primary_key("incident_events", "id"),
    )
    create_indexes("incident_events", ["incident_id"])


def downgrade() -> None:
    drop_indexes("incident_events", ["incident_id"])
    op.drop_table("incident_events")
    op.drop_table("watch_heartbeats")
    drop_indexes("push_runs", ["kind", "status"], ["finished_at"])
    op.drop_table("push_runs")
    drop_indexes("incidents", ["status"])
    op.drop_table("incidents")
    op.drop_table("api_tokens")
