"""push_runs: what each progress report said, so reports that repeat can be told apart

* ``reported_at``: when the latest progress report came, whether it moved the run or
  only said the same thing again (``progress_at`` is when one last moved it). NULL on
  rows reported before this revision: read as ``progress_at``.
* ``repeats``: how many progress reports in a row said the same step and counters.
* ``step_budget_s``, ``step_expected_s``: the budget and expected time the latest
  report gave its step.
* ``done``, ``total``: the counters the latest report carried.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0027"
down_revision = "0026"


def upgrade() -> None:
    with op.batch_alter_table("push_runs") as batch:
        batch.add_column(c.epoch("reported_at"))
        batch.add_column(sa.Column("repeats", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("step_budget_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("step_expected_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("done", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("total", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("push_runs") as batch:
        for name in ("total", "done", "step_expected_s", "step_budget_s", "repeats", "reported_at"):
            batch.drop_column(name)
