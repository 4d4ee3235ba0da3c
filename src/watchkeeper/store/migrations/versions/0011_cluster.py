"""cluster: a fenced leader lease, replica heartbeats, shared chat pacing, owned claims

Several replicas share one database. The leader lease (one row, with an epoch
that grows with every change of holder) says which replica runs the singleton
loops; ``cluster_members`` says which replicas are alive; ``chat_pacing``
spaces messages to one conversation across replicas.

Deliveries gain ``claim_until`` and actions gain ``replica``, so a row is
recovered only once its owner is gone. Incident events gain ``routed_at``:
routing reads the unrouted ones instead of an in-memory id cursor. Events
already in the database are marked routed at their own time, so an upgrade
sends nothing old again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.create_table(
        "cluster_lease",
        c.string("name", 64, nullable=False),
        c.string("holder", 200),
        c.integer("epoch", nullable=False),
        c.epoch("expires_at", nullable=False),
        c.epoch("acquired_at"),
        c.primary_key("cluster_lease", "name"),
    )
    op.create_table(
        "cluster_members",
        c.string("replica", 200, nullable=False),
        c.string("host", 200, nullable=False),
        c.integer("pid", nullable=False),
        c.string("version", 64, nullable=False),
        c.epoch("started_at", nullable=False),
        c.epoch("beat_at", nullable=False),
        c.primary_key("cluster_members", "replica"),
    )
    c.create_indexes("cluster_members", ["beat_at"])
    op.create_table(
        "chat_pacing",
        c.string("place", 400, nullable=False),
        c.epoch("next_at", nullable=False),
        c.primary_key("chat_pacing", "place"),
    )
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(c.epoch("claim_until"))
    with op.batch_alter_table("actions") as batch:
        batch.add_column(c.string("replica", 200))
    with op.batch_alter_table("incident_events") as batch:
        batch.add_column(c.epoch("routed_at"))
    op.execute("UPDATE incident_events SET routed_at = at")
    op.create_index(
        "ix_incident_events_unrouted",
        "incident_events",
        ["id"],
        unique=False,
        sqlite_where=sa.text("routed_at IS NULL"),
        postgresql_where=sa.text("routed_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_incident_events_unrouted", table_name="incident_events")
    with op.batch_alter_table("incident_events") as batch:
        batch.drop_column("routed_at")
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("replica")
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("claim_until")
    op.drop_table("chat_pacing")
    c.drop_indexes("cluster_members", ["beat_at"])
    op.drop_table("cluster_members")
    op.drop_table("cluster_lease")
