"""Tables of prices an admin set: per provider and model, beside the configuration file's."""

from __future__ import annotations

import sqlalchemy as sa

from watchkeeper.store.schema.columns import epoch, metadata

# USD per million tokens; provider and model lowercased, as the pricer looks them up.
price_overrides = sa.Table(
    "price_overrides",
    metadata,
    sa.Column("provider", sa.String(100), primary_key=True),
    sa.Column("model", sa.String(200), primary_key=True),
    sa.Column("input_per_mtok", sa.Float(precision=53), nullable=False),
    sa.Column("output_per_mtok", sa.Float(precision=53), nullable=False),
    sa.Column("cache_read_per_mtok", sa.Float(precision=53), nullable=True),
    sa.Column("cache_write_per_mtok", sa.Float(precision=53), nullable=True),
    sa.Column("set_by", sa.String(200), nullable=False),
    epoch("set_at", nullable=False),
)
