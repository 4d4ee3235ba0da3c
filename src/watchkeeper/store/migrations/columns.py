"""The column and constraint shapes every migration repeats, spelled once.

Migrations are history that existing databases replay: each helper builds
exactly the objects the scripts used to spell out by hand, so the DDL they
emit does not change. Names follow the metadata's naming convention.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op


def serial_id() -> sa.Column[Any]:
    """The autoincrement integer key ``id``."""
    return sa.Column("id", sa.Integer(), autoincrement=True, nullable=False)


def epoch(name: str, *, nullable: bool = True) -> sa.Column[Any]:
    """A time column: UTC epoch seconds in double precision."""
    return sa.Column(name, sa.Float(precision=53), nullable=nullable)


def string(name: str, length: int, *, nullable: bool = True) -> sa.Column[Any]:
    """A bounded text column."""
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def json(name: str, *, nullable: bool = True) -> sa.Column[Any]:
    """A JSON column."""
    return sa.Column(name, sa.JSON(), nullable=nullable)


def integer(name: str, *, nullable: bool = True) -> sa.Column[Any]:
    """An integer column."""
    return sa.Column(name, sa.Integer(), nullable=nullable)


def primary_key(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    """The primary key of ``table``, named ``pk_<table>``."""
    return sa.PrimaryKeyConstraint(*columns, name=op.f(f"pk_{table}"))


def unique(table: str, *columns: str) -> sa.UniqueConstraint:
    """A unique constraint, named ``uq_<table>_<columns>``."""
    return sa.UniqueConstraint(*columns, name=op.f(f"uq_{table}_{'_'.join(columns)}"))


def cascade(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    """``column`` refers to ``target.id``; deleting the target deletes the row."""
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete="CASCADE"
    )


def create_indexes(table: str, *indexes: list[str]) -> None:
    """One plain index of ``table`` per list of columns, named ``ix_<table>_<columns>``."""
    for columns in indexes:
        op.create_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table, columns, unique=False)


def drop_indexes(table: str, *indexes: list[str]) -> None:
    """Drop what :func:`create_indexes` made, in the order given."""
    for columns in indexes:
        op.drop_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table_name=table)
