"""Tables that let several replicas share one database: who is alive, who leads, who paces."""

from __future__ import annotations

import sqlalchemy as sa

from watchkeeper.store.schema.columns import epoch, metadata

#: The one lease row's name: the replica holding it runs the singleton loops.
LEADER = "leader"

# The leader lease. ``epoch`` grows by one with every change of holder; each write a singleton
# loop makes checks, in its own transaction, that the holder and epoch are still its own.
cluster_lease = sa.Table(
    "cluster_lease",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=True),
    sa.Column("epoch", sa.Integer, nullable=False),
    epoch("expires_at", nullable=False),
    epoch("acquired_at"),
)

# One row per running replica, rewritten on every lease tick: a row whose beat lapsed is a
# replica that is gone, and what it claimed may be recovered by the others.
cluster_members = sa.Table(
    "cluster_members",
    metadata,
    sa.Column("replica", sa.String(200), primary_key=True),
    sa.Column("host", sa.String(200), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("version", sa.String(64), nullable=False),
    epoch("started_at", nullable=False),
    epoch("beat_at", nullable=False),
    sa.Index(None, "beat_at"),
)

# The next moment a message may go to one conversation, shared so N replicas pace it like one.
chat_pacing = sa.Table(
    "chat_pacing",
    metadata,
    sa.Column("place", sa.String(400), primary_key=True),
    epoch("next_at", nullable=False),
)
