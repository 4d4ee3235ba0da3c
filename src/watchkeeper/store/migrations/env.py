"""Alembic environment: always driven programmatically with a live connection."""

from __future__ import annotations

from alembic import context

from watchkeeper.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    transaction_per_migration=False,
)
with context.begin_transaction():
    context.run_migrations()
