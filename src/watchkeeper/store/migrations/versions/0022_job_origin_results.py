"""job origin and results: a job from a GitHub pull request or issue says there how it ended

``queue_jobs.origin`` keeps where a job came from (``github:OWNER/REPO#N``).
``queue_job_results`` is the journal of posting its end there, one row per job
that has such an origin: ``waiting`` until the job ends, ``firing`` once a server
claimed the post (one conditional update, so one replica wins), then ``fired`` or
``failed``; a claim left ``firing`` too long becomes ``maybe_fired`` and is never
posted again. Deleted with its job.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0022"
down_revision = "0021"


def upgrade() -> None:
    with op.batch_alter_table("queue_jobs") as batch:
        batch.add_column(sa.Column("origin", sa.String(length=300), nullable=True))
    op.create_table(
        "queue_job_results",
        c.string("job_id", 64, nullable=False),
        c.string("state", 16, nullable=False),
        c.string("end_key", 100),
        c.epoch("claimed_at"),
        c.epoch("settled_at"),
        c.string("error", 2000),
        c.cascade("queue_job_results", "job_id", "queue_jobs"),
        c.primary_key("queue_job_results", "job_id"),
    )
    op.create_index(op.f("ix_queue_job_results_state"), "queue_job_results", ["state"])


def downgrade() -> None:
    op.drop_index(op.f("ix_queue_job_results_state"), table_name="queue_job_results")
    op.drop_table("queue_job_results")
    if op.get_bind().dialect.name == "sqlite":
        # Not a batch copy: dropping the old queue_jobs would cascade to every task.
        op.execute("ALTER TABLE queue_jobs DROP COLUMN origin")
    else:
        op.drop_column("queue_jobs", "origin")
