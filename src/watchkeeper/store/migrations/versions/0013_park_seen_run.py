"""park seen run: a park remembers how its watched run looked, so the engine sees it move

The wake breaker of a session used to reset on the session's own progress
note. It now resets only on progress the engine observes: the watched run's
log grew, or the run ended, since the park was recorded (or since the engine
last counted a move). ``seen_status`` and ``seen_log_size`` hold that last
look. Parks written before this revision have none: the engine's first look
records it without counting it as progress.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    with op.batch_alter_table("proc_parks") as batch:
        batch.add_column(c.string("seen_status", 16))
        batch.add_column(sa.Column("seen_log_size", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("proc_parks") as batch:
        batch.drop_column("seen_log_size")
        batch.drop_column("seen_status")
