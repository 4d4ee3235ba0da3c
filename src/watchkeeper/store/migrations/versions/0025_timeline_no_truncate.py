"""timeline_events: TRUNCATE is refused too, not only UPDATE and DELETE

0019 made the timeline append-only with row triggers, which a ``TRUNCATE``
does not fire: on PostgreSQL one statement still emptied it. A statement
trigger ``BEFORE TRUNCATE`` now refuses it with the same words, whoever
connects. SQLite has no ``TRUNCATE``: its ``DELETE`` without ``WHERE`` fires
the row trigger and is refused already.

An administrator who must reset the table drops the triggers first (a
deliberate act), or, as a superuser, sets ``session_replication_role`` to
``replica`` for the session, which PostgreSQL honours for every trigger (the
test suite's reset does that). Going down drops the statement trigger.
"""

from __future__ import annotations

from alembic import op

revision = "0025"
down_revision = "0024"

#: Every table the database keeps append-only (0019's row triggers, this statement trigger).
APPEND_ONLY = ("timeline_events",)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for table in APPEND_ONLY:
        # 0019's function raises with TG_OP in its words, so it serves a statement too.
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {table}_append_only()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for table in APPEND_ONLY:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
