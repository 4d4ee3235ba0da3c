"""witness key: the shim signs a run's witness, so one the command writes is told apart

A run's folder is writable by its command, which could write a witness of its
own (``exit 0``) while it runs on. Each new run records a random key, which
the launcher hands to the shim on its handshake socket; the shim signs the
witness with it and the engine accepts only a witness whose signature checks.

Backfill: none. Runs recorded before this revision have no key, and their
shims sign nothing: their witness is taken as before.
"""

from __future__ import annotations

from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    with op.batch_alter_table("proc_runs") as batch:
        batch.add_column(c.string("witness_key", 128))


def downgrade() -> None:
    with op.batch_alter_table("proc_runs") as batch:
        batch.drop_column("witness_key")
