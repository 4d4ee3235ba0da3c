"""The metadata every table is declared on, and the time column every aggregate uses.

A leaf of the schema modules: each of them imports it, and it imports none of
them, so ``schema.py`` can gather them all without a cycle.

Times are stored as UTC epoch seconds (double precision): exact enough, cheap
to read in bulk, and free of the SQLite-has-no-time-zone trap. They become
aware datetimes at the edge of each store module.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def epoch(name: str, *, nullable: bool = True) -> sa.Column[float]:
    """A time column: UTC epoch seconds in double precision."""
    return sa.Column(name, sa.Float(precision=53), nullable=nullable)
