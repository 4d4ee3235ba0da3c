"""The metadata every table is declared on, and the column shapes the tables share.

A leaf of the schema modules: each of them imports it, and it imports none of
them, so ``schema.py`` can gather them all without a cycle.

Times are stored as UTC epoch seconds (double precision): exact enough, cheap
to read in bulk, and free of the SQLite-has-no-time-zone trap. They become
aware datetimes at the edge of each store module.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    false,
    true,
)
from sqlalchemy.types import TypeEngine

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def epoch(name: str, *, nullable: bool = True) -> Column[float]:
    """A time column: UTC epoch seconds in double precision."""
    return Column(name, Float(precision=53), nullable=nullable)


def serial_id() -> Column[int]:
    """The autoincrement integer key ``id``."""
    return Column("id", Integer, primary_key=True, autoincrement=True)


def key(name: str, length: int) -> Column[str]:
    """A text primary key (or one part of it)."""
    return Column(name, String(length), primary_key=True)


def string(
    name: str,
    length: int,
    *,
    nullable: bool = True,
    unique: bool | None = None,
    default: str | None = None,
) -> Column[str]:
    """A bounded text column."""
    return Column(name, String(length), nullable=nullable, unique=unique, default=default)


def json(name: str, *, nullable: bool = True) -> Column[Any]:
    """A JSON column."""
    return Column(name, JSON, nullable=nullable)


def integer(name: str, *, nullable: bool = True, default: int | None = None) -> Column[int]:
    """An integer column; ``default`` is what an insert that leaves it out writes."""
    return Column(name, Integer, nullable=nullable, default=default)


def number(name: str, *, nullable: bool = True) -> Column[float]:
    """A float column of the dialect's default precision (durations, budgets)."""
    return Column(name, Float, nullable=nullable)


def flag(name: str, *, default: bool) -> Column[bool]:
    """A boolean that is never NULL, defaulted on both sides so old rows read the same."""
    return Column(
        name,
        Boolean,
        nullable=False,
        default=default,
        server_default=true() if default else false(),
    )


def cascade(
    name: str,
    target: str,
    type_: TypeEngine[Any] | type[TypeEngine[Any]] = Integer,
    *,
    nullable: bool = False,
) -> Column[Any]:
    """A reference to ``target.id``; deleting the target deletes the row."""
    return Column(name, type_, ForeignKey(f"{target}.id", ondelete="CASCADE"), nullable=nullable)
