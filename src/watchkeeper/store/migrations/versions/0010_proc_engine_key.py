"""proc engine key: a run names the engine that settles it, by host and data folder

Two engines on one host with different data folders used to settle each
other's runs: a run's witness, owner file and hook log live in the data folder
of the engine that started it, and the other one judged it lost without them.
New runs record ``engine_key`` as ``<host>:<resolved data folder>``.

Backfill: rows written before this revision never recorded their data folder,
so their key is the host they name, bare. An engine settles the runs keyed on
its own host and data folder and also those keyed on its bare host: runs
started before the upgrade are settled exactly as before (by any engine of
that host) and none is orphaned. A bare host never equals a new key, which
always holds a colon and an absolute path.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    with op.batch_alter_table("proc_runs") as batch:
        batch.add_column(c.string("engine_key", 4352))
    op.execute("UPDATE proc_runs SET engine_key = host")
    with op.batch_alter_table("proc_runs") as batch:
        batch.alter_column("engine_key", existing_type=sa.String(length=4352), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("proc_runs") as batch:
        batch.drop_column("engine_key")
