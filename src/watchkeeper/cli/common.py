"""What every command shares: the configuration, the console, the local runtime."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from watchkeeper.errors import WatchkeeperError

if TYPE_CHECKING:
    from watchkeeper.config import Settings
    from watchkeeper.runtime import Runtime


@dataclass
class CliState:
    """Global options, kept on the Typer context."""

    config_path: str | None = None
    debug: bool = False


def state(ctx: typer.Context) -> CliState:
    """The global options of this invocation."""
    found = ctx.find_root().obj
    return found if isinstance(found, CliState) else CliState()


class NoStore(WatchkeeperError, http_status=404, code="no_store"):
    """A command that reads a local store found none where it looked; it makes none."""


def settings(ctx: typer.Context) -> Settings:
    """Load and validate the configuration (``--config`` or ``WATCHKEEPER_CONFIG``)."""
    from watchkeeper import config

    return config.load(state(ctx).config_path)


def pointed_at(loaded: Settings, store: str) -> Settings:
    """``loaded`` with its store replaced by ``store``: a database URL or a data folder."""
    if "://" in store:
        return loaded.model_copy(update={"database_url": store})
    return loaded.model_copy(update={"data_dir": Path(store), "database_url": None})


def store_settings(ctx: typer.Context, store: str | None) -> Settings:
    """The configuration, pointed at ``--store`` (a data folder or a database URL) when given;
    the store must exist either way."""
    loaded = settings(ctx)
    if store:
        loaded = pointed_at(loaded, store)
    require_store(loaded)
    return loaded


def require_store(loaded: Settings) -> None:
    """Raise :class:`NoStore` when the configured SQLite store does not exist.

    A server database (PostgreSQL) is named on purpose; whether it answers is
    told by the first query.
    """
    url = loaded.resolved_database_url
    if not url.startswith("sqlite:///"):
        return
    path = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
    if path.is_file():
        return
    where = path.parent if path.name == "watchkeeper.db" else path
    raise NoStore(
        f"no watchkeeper store at {where}: this command reads the store `watchkeeper serve` "
        "keeps and never makes one. Run it where that server keeps its data, or name the "
        "store with --config FILE (or WATCHKEEPER_CONFIG) or --store PATH"
    )


@contextlib.contextmanager
def local_runtime(ctx: typer.Context, store: str | None = None) -> Iterator[Runtime]:
    """An existing local store and its adapters, opened as ``serve`` would, closed on the way
    out; ``store`` is ``--store`` (default: the configuration's)."""
    from watchkeeper.runtime import Runtime

    runtime = Runtime.open(store_settings(ctx, store))
    try:
        yield runtime
    finally:
        runtime.close()
