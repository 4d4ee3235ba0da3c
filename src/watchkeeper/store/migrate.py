"""Alembic migrations, applied at start and by ``watchkeeper db upgrade``.

Alembic is imported only when a migration actually runs: reading the current
revision is one query, and commands that start processes pay for every import.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text

from watchkeeper.store.engine import is_sqlite, translate_errors

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
# Any constant works: it only has to be the same for every replica.
_PG_MIGRATION_LOCK = 7_001_002


def alembic_config() -> Config:
    """An Alembic configuration that needs no ini file."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str | None:
    """The newest revision shipped with this version of watchkeeper."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or ``None`` for an empty database."""
    with translate_errors("reading the schema revision"), engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        value = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        return None if value is None else str(value)


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; safe to run from several processes at once."""
    from alembic import command

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
