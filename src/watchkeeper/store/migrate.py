"""Alembic migrations, applied at start and by ``watchkeeper db upgrade``.

Alembic is imported only when a migration actually runs: reading the current
revision is one query, and commands that start processes pay for every import.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

from watchkeeper.store.engine import is_sqlite, translate_errors

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
# Any constant works: it only has to be the same for every replica.
_PG_MIGRATION_LOCK = 7_001_002

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _alembic_quiet() -> Iterator[None]:
    """Alembic's loggers at WARNING at least while it runs.

    At INFO (``serve`` logs at INFO) it says a dozen lines on every start, of
    plugins set up and steps applied, before the banner; one line of ours says
    what changed instead.
    """
    logger = logging.getLogger("alembic")
    before = logger.level
    logger.setLevel(max(logging.WARNING, before))
    try:
        yield
    finally:
        logger.setLevel(before)


def alembic_config() -> Config:
    """An Alembic configuration that needs no ini file."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str | None:
    """The newest revision shipped with this version of watchkeeper."""
    with _alembic_quiet():
        from alembic.script import ScriptDirectory

        return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or ``None`` for an empty database."""
    with translate_errors("reading the schema revision"), engine.connect() as connection:
        return _revision(connection)


def _revision(connection: Connection) -> str | None:
    if not inspect(connection).has_table("alembic_version"):
        return None
    value = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return None if value is None else str(value)


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; safe to run from several processes at once.

    A step taken is logged in one line (INFO); Alembic's own lines are held back.
    """
    options = {"sqlite_begin": "IMMEDIATE"} if is_sqlite(engine) else {}
    with (
        _alembic_quiet(),
        translate_errors("migrating the schema"),
        engine.connect() as connection,
    ):
        from alembic import command

        config = alembic_config()
        connection = connection.execution_options(**options)
        with connection.begin():
            if not is_sqlite(engine):
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
                )
            # Read under the lock: a replica that migrated first leaves nothing to tell.
            before = _revision(connection)
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            after = _revision(connection)
    if after == before:
        return
    if before is None:
        log.info("Created the database schema at revision %s", after)
    else:
        log.info("Migrated the database schema from revision %s to %s", before, after)
