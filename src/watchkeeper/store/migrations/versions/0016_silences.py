"""silences and acknowledgements: muting matching work, and who is looking at an incident

``silences`` holds each silence's matchers, who set it, when it starts and
ends (moved to the moment it was expired early), and when its end was queued
for announcement. ``silenced_incidents`` names the incidents whose messages a
silence held back, for that announcement. ``incident_acks`` holds one "I am
on it" per incident, for the episode it was given in.
"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0016"
down_revision = "0015"


def upgrade() -> None:
    op.create_table(
        "silences",
        c.serial_id(),
        c.string("kind", 63),
        c.string("run_id", 200),
        c.string("title_pattern", 500),
        c.string("title_syntax", 8),
        c.string("origin", 300),
        c.string("comment", 2000, nullable=False),
        c.string("created_by", 200, nullable=False),
        c.string("created_via", 32, nullable=False),
        c.epoch("created_at", nullable=False),
        c.epoch("starts_at", nullable=False),
        c.epoch("ends_at", nullable=False),
        c.string("expired_by", 200),
        c.epoch("announced_at"),
        c.primary_key("silences", "id"),
    )
    c.create_indexes("silences", ["ends_at"])
    op.create_table(
        "silenced_incidents",
        c.integer("silence_id", nullable=False),
        c.integer("incident_id", nullable=False),
        c.epoch("at", nullable=False),
        c.cascade("silenced_incidents", "silence_id", "silences"),
        c.cascade("silenced_incidents", "incident_id", "incidents"),
        c.primary_key("silenced_incidents", "silence_id", "incident_id"),
    )
    c.create_indexes("silenced_incidents", ["incident_id"])
    op.create_table(
        "incident_acks",
        c.integer("incident_id", nullable=False),
        c.integer("episode", nullable=False),
        c.string("actor", 200, nullable=False),
        c.string("via", 32, nullable=False),
        c.epoch("at", nullable=False),
        c.cascade("incident_acks", "incident_id", "incidents"),
        c.primary_key("incident_acks", "incident_id"),
    )


def downgrade() -> None:
    op.drop_table("incident_acks")
    c.drop_indexes("silenced_incidents", ["incident_id"])
    op.drop_table("silenced_incidents")
    c.drop_indexes("silences", ["ends_at"])
    op.drop_table("silences")
