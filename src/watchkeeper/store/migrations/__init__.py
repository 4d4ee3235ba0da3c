"""Alembic migrations of the store, and the column shapes they share (``columns``)."""
