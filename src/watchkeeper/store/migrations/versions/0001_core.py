"""core tables: push runs, incidents, tokens, sweep heartbeats"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        c.serial_id(),
        c.string("name", 100, nullable=False),
        c.string("role", 16, nullable=False),
        c.string("token_hash", 64, nullable=False),
        c.epoch("created_at", nullable=False),
        c.epoch("revoked_at"),
        c.primary_key("api_tokens", "id"),
        c.unique("api_tokens", "token_hash"),
    )
    op.create_table(
        "incidents",
        c.serial_id(),
        c.string("kind", 63, nullable=False),
        c.string("run_id", 200, nullable=False),
        c.string("condition", 16, nullable=False),
        c.string("fingerprint", 200, nullable=False),
        c.string("status", 16, nullable=False),
        c.string("title", 500, nullable=False),
        c.string("reason", 2000, nullable=False),
        c.epoch("since", nullable=False),
        c.epoch("opened_at", nullable=False),
        c.epoch("updated_at", nullable=False),
        c.epoch("resolved_at"),
        c.string("resolution", 500),
        c.string("state_token", 100, nullable=False),
        c.json("origin"),
        c.string("effects", 16, nullable=False),
        c.integer("episodes", nullable=False),
        c.primary_key("incidents", "id"),
        c.unique("incidents", "kind", "run_id", "condition", "fingerprint"),
    )
    c.create_indexes("incidents", ["status"])

    op.create_table(
        "push_runs",
        c.string("run_id", 200, nullable=False),
        c.string("kind", 63, nullable=False),
        c.string("title", 500, nullable=False),
        c.string("status", 16, nullable=False),
        c.integer("attempt", nullable=False),
        c.integer("version", nullable=False),
        c.json("origin"),
        c.string("effects", 16, nullable=False),
        sa.Column("budget_s", sa.Float(), nullable=True),
        sa.Column("expected_s", sa.Float(), nullable=True),
        sa.Column("lease_s", sa.Float(), nullable=False),
        c.epoch("started_at", nullable=False),
        c.epoch("progress_at", nullable=False),
        c.epoch("seen_at", nullable=False),
        c.epoch("finished_at"),
        c.epoch("updated_at", nullable=False),
        c.string("step", 2000),
        c.string("failure_reason", 2000),
        c.string("failure_fingerprint", 200),
        sa.Column("detail", sa.Text(), nullable=True),
        c.primary_key("push_runs", "run_id"),
    )
    c.create_indexes("push_runs", ["finished_at"], ["kind", "status"])

    op.create_table(
        "watch_heartbeats",
        c.string("replica", 200, nullable=False),
        c.epoch("last_sweep_at", nullable=False),
        c.epoch("last_ok_at"),
        sa.Column("duration_s", sa.Float(), nullable=False),
        c.integer("runs", nullable=False),
        c.string("error", 2000),
        c.primary_key("watch_heartbeats", "replica"),
    )
    op.create_table(
        "incident_events",
        c.serial_id(),
        c.integer("incident_id", nullable=False),
        c.epoch("at", nullable=False),
        c.string("type", 32, nullable=False),
        c.string("detail", 2000),
        c.cascade("incident_events", "incident_id", "incidents"),
        c.primary_key("incident_events", "id"),
    )
    c.create_indexes("incident_events", ["incident_id"])


def downgrade() -> None:
    c.drop_indexes("incident_events", ["incident_id"])
    op.drop_table("incident_events")
    op.drop_table("watch_heartbeats")
    c.drop_indexes("push_runs", ["kind", "status"], ["finished_at"])
    op.drop_table("push_runs")
    c.drop_indexes("incidents", ["status"])
    op.drop_table("incidents")
    op.drop_table("api_tokens")
