"""queue_tasks: the lease's index ends in ``id``, as its order does

A lease reads a fleet's queued tasks ordered by ``queued_at`` then ``id``.
The index on ``(status, fleet, queued_at)`` left PostgreSQL sorting every
queued row of the fleet before the page's ``LIMIT``; with ``id`` as its last
key the page is read in index order and the scan stops after one page.
"""

from __future__ import annotations

from watchkeeper.store.migrations import columns as c

revision = "0017"
down_revision = "0016"


def upgrade() -> None:
    c.create_indexes("queue_tasks", ["status", "fleet", "queued_at", "id"])
    c.drop_indexes("queue_tasks", ["status", "fleet", "queued_at"])


def downgrade() -> None:
    c.create_indexes("queue_tasks", ["status", "fleet", "queued_at"])
    c.drop_indexes("queue_tasks", ["status", "fleet", "queued_at", "id"])
