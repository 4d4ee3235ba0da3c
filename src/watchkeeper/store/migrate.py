"""Alembic migrations, applied at start and by ``watchkeeper db upgrade``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from watchkeeper.store.engine import is_sqlite, translate_errors

MIGRATIONS = Path(__file__).parent / "migrations"
# Any constant works: it only has to be the same for every replica.
_PG_MIGRATION_LOCK = 7_001_002


def alembic_config() -> Config:
    """An Alembic configuration that needs no ini file."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str | None:
    """The newest revision shipped with this version of watchkeeper."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or ``None`` for an empty database."""
    with translate_errors("reading the schema revision"), engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; safe to run from several processes at once."""
    config = alembic_config()
    options = {"sqlite_begin": "IMMEDIATE"} if is_sqlite(engine) else {}
    with translate_errors("migrating the schema"), engine.connect() as connection:
        connection = connection.execution_options(**options)
        with connection.begin():
            if not is_sqlite(engine):
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
                )
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
