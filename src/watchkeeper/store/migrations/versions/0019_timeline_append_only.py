"""timeline_events: append-only in the database, not only in the API

An event is what a run reported when it happened; the execution record and the spend
are built from it. Triggers refuse every UPDATE and DELETE of a row, whoever connects,
so an edit cannot slip in beside the API. (TRUNCATE, an administrator's whole-table
reset, is left alone.) Going down drops the triggers.
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"

_MESSAGE = "timeline events are append-only: an event is never changed nor deleted"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER timeline_events_no_{verb.lower()} BEFORE {verb} "
                f"ON timeline_events BEGIN SELECT RAISE(ABORT, '{_MESSAGE}'); END"
            )
        return
    op.execute(
        "CREATE FUNCTION timeline_events_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN RAISE EXCEPTION '{_MESSAGE} (% refused)', TG_OP "
        "USING ERRCODE = 'restrict_violation'; END $$"
    )
    op.execute(
        "CREATE TRIGGER timeline_events_append_only BEFORE UPDATE OR DELETE "
        "ON timeline_events FOR EACH ROW EXECUTE FUNCTION timeline_events_append_only()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS timeline_events_no_update")
        op.execute("DROP TRIGGER IF EXISTS timeline_events_no_delete")
        return
    op.execute("DROP TRIGGER IF EXISTS timeline_events_append_only ON timeline_events")
    op.execute("DROP FUNCTION IF EXISTS timeline_events_append_only()")
