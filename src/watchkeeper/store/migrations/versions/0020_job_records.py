"""job_records: execution records kept as signed; link signatures of Ed25519

A record was assembled and signed again on every read, so an event changed in the
database yielded a record that verified. Records are now signed once (Ed25519), when
first assembled after the job ended, and kept here. A link's signature column grows to
hold ``ed25519:<key id>:<signature>``. Going down drops the kept records.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0020"
down_revision = "0019"


def upgrade() -> None:
    op.create_table(
        "job_records",
        c.string("job_id", 64, nullable=False),
        sa.Column("tasks", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        c.epoch("signed_at", nullable=False),
        sa.PrimaryKeyConstraint("job_id", "tasks", name=op.f("pk_job_records")),
    )
    with op.batch_alter_table("timeline_links") as batch:
        batch.alter_column(
            "signature", type_=sa.String(200), existing_type=sa.String(64), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("timeline_links") as batch:
        batch.alter_column(
            "signature", type_=sa.String(64), existing_type=sa.String(200), existing_nullable=False
        )
    op.drop_table("job_records")
