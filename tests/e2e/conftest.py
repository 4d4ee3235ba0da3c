"""Fixtures the end-to-end tests share with the integration tests they grew from."""

from __future__ import annotations

from ..integration.procs.conftest import data_dir, engine

__all__ = ["data_dir", "engine"]
