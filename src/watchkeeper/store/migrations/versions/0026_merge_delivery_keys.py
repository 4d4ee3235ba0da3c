"""forge_deliveries: merged pull requests are known by what they are, not by their bytes

A GitHub delivery was handled once per SHA-256 of its body, so the same merge
sent again in other bytes (another webhook of the repository, other
formatting) linked its jobs a second time. A merge is now known by
``merge:<repository>#<number>@<merge commit>``, and each job's link to it by
that and the job (:mod:`watchkeeper.store.forge_keys`).

Backfill: every merge link already recorded gets both keys in
``forge_deliveries``, so a merge handled before this revision is not linked
again when it arrives afterwards, in the same bytes or others. Going down
removes those keys; the body digests stay, as before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.forge_keys import MERGE_PREFIX, merge_delivery_id, merge_link_id

revision = "0026"
down_revision = "0025"

_links = sa.table(
    "timeline_links",
    sa.column("job_id", sa.String),
    sa.column("kind", sa.String),
    sa.column("detail", sa.JSON),
    sa.column("at", sa.Float),
)
_deliveries = sa.table(
    "forge_deliveries",
    sa.column("source", sa.String),
    sa.column("delivery_id", sa.String),
    sa.column("received_at", sa.Float),
)


def upgrade() -> None:
    bind = op.get_bind()
    merges = bind.execute(
        sa.select(_links.c.job_id, _links.c.detail, _links.c.at).where(_links.c.kind == "merge")
    )
    keys: dict[str, float] = {}
    for job_id, detail, at in merges:
        if not isinstance(detail, dict):
            continue
        merge = merge_delivery_id(
            detail.get("repository"), detail.get("number"), detail.get("merge_commit_sha")
        )
        if merge is not None:
            for key in (merge, merge_link_id(merge, job_id)):
                keys[key] = min(at, keys.get(key, at))
    if not keys:
        return
    seen = set(
        bind.execute(
            sa.select(_deliveries.c.delivery_id).where(
                _deliveries.c.source == "github",
                _deliveries.c.delivery_id.like(f"{MERGE_PREFIX}%"),
            )
        ).scalars()
    )
    rows = [
        {"source": "github", "delivery_id": key, "received_at": at}
        for key, at in sorted(keys.items())
        if key not in seen
    ]
    if rows:
        bind.execute(sa.insert(_deliveries), rows)


def downgrade() -> None:
    op.execute(
        sa.delete(_deliveries).where(
            _deliveries.c.source == "github", _deliveries.c.delivery_id.like(f"{MERGE_PREFIX}%")
        )
    )
