"""price overrides: prices an admin sets from the dashboard or the API

One row per provider and model (both lowercased), in USD per million tokens. The
timeline prices new events with it when the configuration file sets no price for
that model; events already stored keep the cost they were given.
"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0021"
down_revision = "0020"


def upgrade() -> None:
    op.create_table(
        "price_overrides",
        c.string("provider", 100, nullable=False),
        c.string("model", 200, nullable=False),
        c.epoch("input_per_mtok", nullable=False),
        c.epoch("output_per_mtok", nullable=False),
        c.epoch("cache_read_per_mtok"),
        c.epoch("cache_write_per_mtok"),
        c.string("set_by", 200, nullable=False),
        c.epoch("set_at", nullable=False),
        c.primary_key("price_overrides", "provider", "model"),
    )


def downgrade() -> None:
    op.drop_table("price_overrides")
